//! Kafka's key stores and trust stores, read into what rustls takes: a private key with its
//! certificate chain, and a set of trusted certificates.
//!
//! - `PEM` (KIP-651): the key and chain inline (`ssl.keystore.key`,
//!   `ssl.keystore.certificate.chain`) or together in the file at `ssl.keystore.location`;
//!   trusted certificates inline (`ssl.truststore.certificates`) or in the file at
//!   `ssl.truststore.location`. A key written as `ENCRYPTED PRIVATE KEY` (PKCS#8 with PBES2)
//!   is decrypted with `ssl.key.password`, as Kafka requires for encrypted PEM keys.
//! - `PKCS12`: the file at the location, opened with its password (`ssl.keystore.password`;
//!   the key's own password is the store's, as keytool and openssl write them).
//! - `JKS`, Kafka's default type: Java's JKS loader also reads PKCS12 files (keytool has
//!   written PKCS12 by default since Java 9), so a PKCS12 file given as JKS is read as
//!   PKCS12. A real JKS file (magic `FEEDFEED`) is refused with how to convert it: no
//!   maintained Rust crate reads the format.
//!
//! Files are read through `Disk`; the paths are returned so that a change can be noticed.

use std::path::{Path, PathBuf};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::disk::Disk;

/// A key store's contents.
pub struct KeyMaterial {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

/// The settings of one store, as one listener sees them.
pub struct StoreSettings<'a> {
    pub kind: &'a str,
    pub location: Option<&'a str>,
    pub password: Option<&'a str>,
    /// PEM only: the inline key (key stores) or certificates (trust stores).
    pub inline: Option<&'a str>,
    /// PEM key stores only: the inline certificate chain.
    pub inline_chain: Option<&'a str>,
    /// `ssl.key.password`.
    pub key_password: Option<&'a str>,
}

const JKS_MAGIC: [u8; 4] = [0xfe, 0xed, 0xfe, 0xed];

/// Reads a key store; returns it and the file it came from, if any.
pub fn load_key_store(
    disk: &Disk,
    s: &StoreSettings<'_>,
) -> Result<(KeyMaterial, Option<PathBuf>), String> {
    match s.kind.to_ascii_uppercase().as_str() {
        "PEM" => {
            let (text, path) = match (s.inline, s.inline_chain, s.location) {
                (Some(key), Some(chain), None) => (format!("{key}\n{chain}"), None),
                (None, None, Some(location)) => {
                    let path = PathBuf::from(location);
                    (read_text(disk, &path)?, Some(path))
                }
                _ => {
                    return Err("ssl.keystore.type=PEM needs either ssl.keystore.key and \
                         ssl.keystore.certificate.chain, or ssl.keystore.location"
                        .into())
                }
            };
            Ok((pem_key_material(&text, s.key_password)?, path))
        }
        "PKCS12" | "JKS" => {
            let location = s
                .location
                .ok_or("ssl.keystore.location is required for this ssl.keystore.type")?;
            let path = PathBuf::from(location);
            let store = read_pkcs12(disk, &path, s.password)?;
            let (_, chain) = store
                .private_key_chain()
                .ok_or_else(|| format!("{location}: no private key entry"))?;
            let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(chain.key().to_vec()));
            let chain = chain
                .chain()
                .iter()
                .map(|c| CertificateDer::from(c.as_der().to_vec()))
                .collect();
            Ok((KeyMaterial { chain, key }, Some(path)))
        }
        other => Err(format!("ssl.keystore.type {other} is not supported")),
    }
}

/// Reads a trust store's certificates; returns them and the file they came from, if any.
pub fn load_trust_store(
    disk: &Disk,
    s: &StoreSettings<'_>,
) -> Result<(Vec<CertificateDer<'static>>, Option<PathBuf>), String> {
    match s.kind.to_ascii_uppercase().as_str() {
        "PEM" => {
            let (text, path) = match (s.inline, s.location) {
                (Some(certs), None) => (certs.to_string(), None),
                (None, Some(location)) => {
                    let path = PathBuf::from(location);
                    (read_text(disk, &path)?, Some(path))
                }
                _ => {
                    return Err(
                        "ssl.truststore.type=PEM needs one of ssl.truststore.certificates \
                         and ssl.truststore.location"
                            .into(),
                    )
                }
            };
            Ok((pem_certificates(&text)?, path))
        }
        "PKCS12" | "JKS" => {
            let location = s
                .location
                .ok_or("ssl.truststore.location is required for this ssl.truststore.type")?;
            let path = PathBuf::from(location);
            let store = read_pkcs12(disk, &path, s.password)?;
            let certs = store
                .entries()
                .flat_map(|(_, entry)| match entry {
                    p12_keystore::KeyStoreEntry::Certificate(c) => vec![c.as_der().to_vec()],
                    p12_keystore::KeyStoreEntry::PrivateKeyChain(k) => {
                        k.chain().iter().map(|c| c.as_der().to_vec()).collect()
                    }
                    p12_keystore::KeyStoreEntry::Secret(_) => Vec::new(),
                })
                .map(CertificateDer::from)
                .collect();
            Ok((certs, Some(path)))
        }
        other => Err(format!("ssl.truststore.type {other} is not supported")),
    }
}

fn read_text(disk: &Disk, path: &Path) -> Result<String, String> {
    let bytes = disk
        .read(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    String::from_utf8(bytes).map_err(|_| format!("{}: not PEM text", path.display()))
}

fn read_pkcs12(
    disk: &Disk,
    path: &Path,
    password: Option<&str>,
) -> Result<p12_keystore::KeyStore, String> {
    let bytes = disk
        .read(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.starts_with(&JKS_MAGIC) {
        return Err(format!(
            "{}: a JKS key store; sluice reads PKCS12 and PEM stores. Convert it with \
             `keytool -importkeystore -srckeystore <file> -destkeystore <file>.p12 \
             -deststoretype PKCS12` and set the type to PKCS12",
            path.display()
        ));
    }
    p12_keystore::KeyStore::from_pkcs12(&bytes, password.unwrap_or(""))
        .map_err(|e| format!("{}: cannot read as PKCS12: {e}", path.display()))
}

/// A private key and the certificates after it, from PEM text.
pub fn pem_key_material(text: &str, key_password: Option<&str>) -> Result<KeyMaterial, String> {
    let text = normalize_pem(text);
    let chain = pem_certificates(&text)?;
    if chain.is_empty() {
        return Err("no certificate in the key store".into());
    }
    let key = match PrivateKeyDer::from_pem_slice(text.as_bytes()) {
        Ok(key) => key,
        Err(_) => decrypt_pkcs8(&text, key_password)?,
    };
    Ok(KeyMaterial { chain, key })
}

fn decrypt_pkcs8(text: &str, password: Option<&str>) -> Result<PrivateKeyDer<'static>, String> {
    use pkcs8::der::Decode;
    let der = pem_blocks(text)
        .into_iter()
        .find(|(label, _)| label == "ENCRYPTED PRIVATE KEY")
        .map(|(_, der)| der)
        .ok_or("no private key in the key store")?;
    let password =
        password.ok_or("the private key is encrypted; set ssl.key.password to decrypt it")?;
    let encrypted = pkcs8::EncryptedPrivateKeyInfo::from_der(&der)
        .map_err(|e| format!("encrypted private key: {e}"))?;
    let plain = encrypted
        .decrypt(password)
        .map_err(|_| "cannot decrypt the private key with ssl.key.password".to_string())?;
    Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        plain.as_bytes().to_vec(),
    )))
}

/// Every certificate in PEM text.
pub fn pem_certificates(text: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    CertificateDer::pem_slice_iter(normalize_pem(text).as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("certificates: {e}"))
}

/// The `-----BEGIN <label>-----` ... `-----END <label>-----` blocks of a text, each with its
/// base64 body decoded. Whitespace inside a body is ignored, as Kafka's PEM parser ignores it:
/// a PEM value continued over several lines of server.properties arrives as one line.
fn pem_blocks(text: &str) -> Vec<(String, Vec<u8>)> {
    use base64::Engine;
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN ") {
        let after = &rest[start + "-----BEGIN ".len()..];
        let Some(label_end) = after.find("-----") else {
            break;
        };
        let label = &after[..label_end];
        let body_and_rest = &after[label_end + 5..];
        let end_marker = format!("-----END {label}-----");
        let Some(body_end) = body_and_rest.find(&end_marker) else {
            break;
        };
        let body: String = body_and_rest[..body_end]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        if let Ok(der) = base64::engine::general_purpose::STANDARD.decode(body) {
            blocks.push((label.to_string(), der));
        }
        rest = &body_and_rest[body_end + end_marker.len()..];
    }
    blocks
}

/// PEM text re-written with one base64 line per 64 characters, whatever its line breaks were.
fn normalize_pem(text: &str) -> String {
    use base64::Engine;
    let mut out = String::new();
    for (label, der) in pem_blocks(text) {
        let body = base64::engine::general_purpose::STANDARD.encode(der);
        out.push_str(&format!("-----BEGIN {label}-----\n"));
        for line in body.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str(&format!("-----END {label}-----\n"));
    }
    out
}
