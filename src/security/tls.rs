//! One TLS listener's server settings, from Kafka's `ssl.*` keys as that listener sees them
//! (`listener.name.<l>.ssl.*` over `ssl.*`): the key store and trust store
//! (`tls_stores`), `ssl.client.auth` (`none`, `requested`: a certificate is asked for and
//! checked if sent; `required`), `ssl.enabled.protocols` (TLSv1.2 and TLSv1.3; older versions,
//! which rustls does not implement, are left out with a warning), `ssl.cipher.suites` (Java's
//! names; those rustls implements), and the principal of a client certificate
//! (`principal_mapping`).
//!
//! Certificates are reloaded when their files change: `reload_if_changed`, which the server
//! calls every `sluice.ssl.file.check.interval.ms`, rebuilds the rustls settings when a store
//! file's modification time or contents changed; new handshakes use them, connections already
//! established keep theirs. A store that no longer loads keeps the previous settings in force
//! (and is logged), as Kafka keeps its SSL factory when a reconfiguration fails.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::CertificateDer;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};

use super::principal_mapping::{subject_dn, PrincipalMapper};
use super::tls_stores::{load_key_store, load_trust_store, StoreSettings};
use super::Principal;
use crate::config::{Config, Listener};
use crate::disk::Disk;

/// `ssl.client.auth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

/// A store file, its modification time and its contents when last loaded.
type WatchedFile = (PathBuf, Option<SystemTime>, Vec<u8>);

/// A TLS listener's rustls settings, reloadable, and its certificate principal mapping.
pub struct TlsServer {
    listener: String,
    config: Arc<Config>,
    disk: Disk,
    current: RwLock<Arc<ServerConfig>>,
    /// The store files and what they were when last loaded.
    files: Mutex<Vec<WatchedFile>>,
    mapper: PrincipalMapper,
    pub client_auth: ClientAuth,
}

impl TlsServer {
    /// Builds the listener's settings; an error names what is wrong.
    pub fn load(config: Arc<Config>, listener: &Listener, disk: Disk) -> Result<TlsServer, String> {
        let name = listener.name.clone();
        let value = |key: &str| config.listener_value(&name, key);
        let client_auth = match value("ssl.client.auth")
            .unwrap_or("none")
            .to_ascii_lowercase()
        {
            s if s == "none" => ClientAuth::None,
            s if s == "requested" => ClientAuth::Requested,
            s if s == "required" => ClientAuth::Required,
            other => return Err(format!("ssl.client.auth: unknown value '{other}'")),
        };
        let mapper =
            PrincipalMapper::parse(value("ssl.principal.mapping.rules").unwrap_or("DEFAULT"))
                .map_err(|e| format!("ssl.principal.mapping.rules: {e}"))?;
        let (server_config, files) = build(&config, &name, client_auth, &disk)?;
        let files = files
            .into_iter()
            .map(|path| {
                let modified = disk.modified(&path).ok();
                let contents = disk.read(&path).unwrap_or_default();
                (path, modified, contents)
            })
            .collect();
        Ok(TlsServer {
            listener: name,
            config,
            disk,
            current: RwLock::new(server_config),
            files: Mutex::new(files),
            mapper,
            client_auth,
        })
    }

    /// The settings new handshakes use.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Reloads the stores when one of their files changed; true when new settings are in force.
    pub fn reload_if_changed(&self) -> bool {
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let changed = files.iter().any(|(path, modified, contents)| {
            let now = self.disk.modified(path).ok();
            now != *modified || self.disk.read(path).ok().as_ref() != Some(contents)
        });
        if !changed {
            return false;
        }
        match build(&self.config, &self.listener, self.client_auth, &self.disk) {
            Ok((server_config, paths)) => {
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = server_config;
                *files = paths
                    .into_iter()
                    .map(|path| {
                        let modified = self.disk.modified(&path).ok();
                        let contents = self.disk.read(&path).unwrap_or_default();
                        (path, modified, contents)
                    })
                    .collect();
                tracing::info!(listener = %self.listener, "reloaded TLS key and trust stores");
                true
            }
            Err(e) => {
                // Keep the old settings; try again once the files change again.
                for (path, modified, contents) in files.iter_mut() {
                    *modified = self.disk.modified(path).ok();
                    *contents = self.disk.read(path).unwrap_or_default();
                }
                tracing::error!(listener = %self.listener, "TLS stores changed but do not load, keeping the previous ones: {e}");
                false
            }
        }
    }

    /// The principal of a connection on an SSL listener: the mapped subject of the client's
    /// certificate, or `User:ANONYMOUS` without one.
    pub fn principal(
        &self,
        peer_certificates: Option<&[CertificateDer<'_>]>,
    ) -> Result<Principal, String> {
        match peer_certificates.and_then(|certs| certs.first()) {
            None => Ok(Principal::anonymous()),
            Some(cert) => {
                let dn = subject_dn(cert.as_ref())?;
                Ok(Principal::user(&self.mapper.name(&dn)?))
            }
        }
    }
}

/// The rustls settings and the files they were read from.
fn build(
    config: &Config,
    listener: &str,
    client_auth: ClientAuth,
    disk: &Disk,
) -> Result<(Arc<ServerConfig>, Vec<PathBuf>), String> {
    let value = |key: &str| config.listener_value(listener, key);
    let mut files = Vec::new();
    let key_store = StoreSettings {
        kind: value("ssl.keystore.type").unwrap_or("JKS"),
        location: value("ssl.keystore.location"),
        password: value("ssl.keystore.password"),
        inline: value("ssl.keystore.key"),
        inline_chain: value("ssl.keystore.certificate.chain"),
        key_password: value("ssl.key.password"),
    };
    if key_store.location.is_none() && key_store.inline.is_none() {
        return Err(format!(
            "listener {listener}: TLS needs a key store (ssl.keystore.location, or \
             ssl.keystore.type=PEM with ssl.keystore.key and ssl.keystore.certificate.chain)"
        ));
    }
    let (keys, key_file) = load_key_store(disk, &key_store)?;
    files.extend(key_file);
    let provider = Arc::new(provider(value("ssl.cipher.suites"))?);
    let versions = protocol_versions(value("ssl.enabled.protocols").unwrap_or("TLSv1.2,TLSv1.3"))?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("ssl.enabled.protocols: {e}"))?;
    let builder = if client_auth == ClientAuth::None {
        builder.with_no_client_auth()
    } else {
        let trust = StoreSettings {
            kind: value("ssl.truststore.type").unwrap_or("JKS"),
            location: value("ssl.truststore.location"),
            password: value("ssl.truststore.password"),
            inline: value("ssl.truststore.certificates"),
            inline_chain: None,
            key_password: None,
        };
        if trust.location.is_none() && trust.inline.is_none() {
            return Err(format!(
                "listener {listener}: ssl.client.auth needs a trust store \
                 (ssl.truststore.location or ssl.truststore.certificates)"
            ));
        }
        let (certs, trust_file) = load_trust_store(disk, &trust)?;
        files.extend(trust_file);
        let mut roots = RootCertStore::empty();
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| format!("trust store certificate: {e}"))?;
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
        let verifier = if client_auth == ClientAuth::Requested {
            verifier.allow_unauthenticated()
        } else {
            verifier
        };
        let verifier = verifier.build().map_err(|e| format!("trust store: {e}"))?;
        builder.with_client_cert_verifier(verifier)
    };
    let server_config = builder
        .with_single_cert(keys.chain, keys.key)
        .map_err(|e| format!("key store: {e}"))?;
    Ok((Arc::new(server_config), files))
}

/// ring's provider, limited to `ssl.cipher.suites` when it is set. Java names TLS 1.3 suites
/// `TLS_AES_128_GCM_SHA256`; rustls names them `TLS13_AES_128_GCM_SHA256`.
fn provider(suites: Option<&str>) -> Result<CryptoProvider, String> {
    let mut provider = rustls::crypto::ring::default_provider();
    let wanted: Vec<String> = suites
        .unwrap_or("")
        .split(',')
        .map(|s| s.trim().to_ascii_uppercase())
        .filter(|s| !s.is_empty())
        .collect();
    if wanted.is_empty() {
        return Ok(provider);
    }
    provider.cipher_suites.retain(|suite| {
        let name = suite.suite().as_str().unwrap_or_default().to_string();
        let java = name.replacen("TLS13_", "TLS_", 1);
        wanted.iter().any(|w| *w == name || *w == java)
    });
    if provider.cipher_suites.is_empty() {
        return Err(format!(
            "ssl.cipher.suites: none of {} is a suite sluice implements",
            wanted.join(",")
        ));
    }
    Ok(provider)
}

fn protocol_versions(list: &str) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let mut versions = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match name {
            "TLSv1.3" => versions.push(&rustls::version::TLS13),
            "TLSv1.2" => versions.push(&rustls::version::TLS12),
            other => tracing::warn!(
                protocol = other,
                "ssl.enabled.protocols: not implemented by rustls (only TLSv1.2 and TLSv1.3); left out"
            ),
        }
    }
    if versions.is_empty() {
        return Err(format!(
            "ssl.enabled.protocols: no protocol sluice implements in '{list}'"
        ));
    }
    Ok(versions)
}
