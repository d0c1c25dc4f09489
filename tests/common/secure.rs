//! A raw-protocol client over any stream (plain TCP or TLS), and the test certificates and
//! settings that TLS and SASL socket tests share. Certificates are made with rcgen when a test
//! runs; no private key is kept anywhere.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

pub struct Conn<S> {
    pub stream: S,
    next_correlation_id: i32,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    pub fn new(stream: S) -> Conn<S> {
        Conn {
            stream,
            next_correlation_id: 1,
        }
    }

    pub async fn send<R: Encodable + HeaderVersion>(
        &mut self,
        api_key: ApiKey,
        version: i16,
        body: &R,
    ) -> i32 {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let header = RequestHeader::default()
            .with_request_api_key(api_key as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("secure-test")));
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        header.encode(&mut buf, R::header_version(version)).unwrap();
        body.encode(&mut buf, version).unwrap();
        let size = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        let _ = self.stream.write_all(&buf).await;
        let _ = self.stream.flush().await;
        correlation_id
    }

    /// Sends a size-prefixed raw frame (a SASL token after a v0 handshake).
    pub async fn send_raw_frame(&mut self, bytes: &[u8]) {
        let mut buf = BytesMut::new();
        buf.put_i32(bytes.len() as i32);
        buf.put_slice(bytes);
        let _ = self.stream.write_all(&buf).await;
        let _ = self.stream.flush().await;
    }

    /// One frame; None when the broker closed the connection.
    pub async fn read_frame(&mut self) -> Option<Bytes> {
        let mut size = [0u8; 4];
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            self.stream.read_exact(&mut size),
        )
        .await;
        match read {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return None,
            Err(_) => panic!("no response within 10 s"),
        }
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut body).await.ok()?;
        Some(Bytes::from(body))
    }

    pub async fn call<Req, Resp>(&mut self, api_key: ApiKey, version: i16, body: &Req) -> Resp
    where
        Req: Encodable + HeaderVersion,
        Resp: Decodable + HeaderVersion,
    {
        self.try_call(api_key, version, body)
            .await
            .expect("broker closed the connection")
    }

    /// The response, or None when the broker closed the connection instead.
    pub async fn try_call<Req, Resp>(
        &mut self,
        api_key: ApiKey,
        version: i16,
        body: &Req,
    ) -> Option<Resp>
    where
        Req: Encodable + HeaderVersion,
        Resp: Decodable + HeaderVersion,
    {
        let correlation_id = self.send(api_key, version, body).await;
        let mut response = self.read_frame().await?;
        let header = ResponseHeader::decode(&mut response, Resp::header_version(version)).unwrap();
        assert_eq!(header.correlation_id, correlation_id);
        Some(Resp::decode(&mut response, version).unwrap())
    }

    /// Whether the broker has closed the connection (reads until end of stream, bounded).
    pub async fn is_closed(&mut self) -> bool {
        let mut buf = [0u8; 1024];
        loop {
            match tokio::time::timeout(
                std::time::Duration::from_secs(5),
                self.stream.read(&mut buf),
            )
            .await
            {
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                Ok(Ok(_)) => continue,
                Err(_) => return false,
            }
        }
    }
}

pub async fn plain(addr: std::net::SocketAddr) -> Conn<TcpStream> {
    Conn::new(TcpStream::connect(addr).await.unwrap())
}

/// A CA, and certificates it signs, for one test.
pub struct TestCa {
    pub cert: rcgen::Certificate,
    pub key: rcgen::KeyPair,
}

/// A certificate with its private key, both as PEM.
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert_der: Vec<u8>,
    pub key_der: Vec<u8>,
}

impl TestCa {
    pub fn new() -> TestCa {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "sluice test CA");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        TestCa { cert, key }
    }

    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// A certificate for `localhost`/127.0.0.1 with subject `CN=<cn>,OU=<ou>` (OU first).
    pub fn issue(&self, cn: &str, ou: &str) -> Issued {
        let mut params =
            rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
                .unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationalUnitName, ou);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().to_vec(),
            key_der: key.serialize_der(),
        }
    }
}

/// A rustls client trusting `ca_pem`, presenting `client` if given.
pub fn tls_connector(ca_pem: &str, client: Option<&Issued>) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some(issued) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from(issued.cert_der.clone())],
                PrivateKeyDer::from_pem_slice(issued.key_pem.as_bytes()).unwrap(),
            )
            .unwrap(),
    };
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

pub type TlsConn = Conn<tokio_rustls::client::TlsStream<TcpStream>>;

/// A TLS connection, or the handshake's error.
pub async fn tls(
    addr: std::net::SocketAddr,
    connector: &tokio_rustls::TlsConnector,
) -> std::io::Result<TlsConn> {
    let tcp = TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let stream = connector.connect(name, tcp).await?;
    Ok(Conn::new(stream))
}
