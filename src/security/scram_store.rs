//! The SCRAM credentials set with AlterUserScramCredentials, kept in
//! `<log.dirs>/sluice-scram-credentials` so they survive restarts. Kafka keeps them as
//! `UserScramCredentialRecord`s in its metadata log; a single node needs only a file. Each
//! line holds what Kafka's record holds, never a password:
//!
//! ```text
//! version: 0
//! <user, percent-encoded> <mechanism id> <iterations> <salt> <stored key> <server key>
//! ```
//!
//! with the three byte strings in base64. The file is replaced atomically
//! (`Disk::write_file_durably`) before a change is answered.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;

use super::scram::{ScramCredential, ScramMechanism};
use crate::disk::names::SCRAM_CREDENTIALS_FILE;
use crate::disk::Disk;

const HEADER: &str = "version: 0";

type Credentials = BTreeMap<(String, ScramMechanism), ScramCredential>;

pub struct ScramStore {
    disk: Disk,
    path: PathBuf,
    credentials: RwLock<Credentials>,
}

/// One change of an AlterUserScramCredentials request.
pub enum ScramChange {
    Upsert(String, ScramMechanism, ScramCredential),
    Delete(String, ScramMechanism),
}

impl ScramStore {
    /// Reads the file in the log directory; none means no credentials.
    pub fn open(disk: &Disk, dir: &Path) -> anyhow::Result<ScramStore> {
        let path = dir.join(SCRAM_CREDENTIALS_FILE);
        let credentials = match disk.read_to_string_if_exists(&path) {
            Ok(Some(text)) => {
                parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
            }
            Ok(None) => Credentials::new(),
            Err(e) => return Err(anyhow::anyhow!("{}: {e}", path.display())),
        };
        Ok(ScramStore {
            disk: disk.clone(),
            path,
            credentials: RwLock::new(credentials),
        })
    }

    pub fn get(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        let credentials = self.credentials.read().unwrap_or_else(|e| e.into_inner());
        credentials.get(&(user.to_string(), mechanism)).cloned()
    }

    /// Every user's mechanisms and iterations, by user.
    pub fn describe(&self) -> BTreeMap<String, Vec<(ScramMechanism, i32)>> {
        let credentials = self.credentials.read().unwrap_or_else(|e| e.into_inner());
        let mut out: BTreeMap<String, Vec<(ScramMechanism, i32)>> = BTreeMap::new();
        for ((user, mechanism), credential) in credentials.iter() {
            out.entry(user.clone())
                .or_default()
                .push((*mechanism, credential.iterations));
        }
        out
    }

    pub fn exists(&self, user: &str, mechanism: ScramMechanism) -> bool {
        self.get(user, mechanism).is_some()
    }

    /// Applies the changes and writes the file; on a write failure nothing changes.
    pub fn apply(&self, changes: Vec<ScramChange>) -> std::io::Result<()> {
        let mut credentials = self.credentials.write().unwrap_or_else(|e| e.into_inner());
        let mut next = credentials.clone();
        for change in changes {
            match change {
                ScramChange::Upsert(user, mechanism, credential) => {
                    next.insert((user, mechanism), credential);
                }
                ScramChange::Delete(user, mechanism) => {
                    next.remove(&(user, mechanism));
                }
            }
        }
        self.disk
            .write_file_durably(&self.path, format(&next).as_bytes())?;
        *credentials = next;
        Ok(())
    }
}

fn format(credentials: &Credentials) -> String {
    let mut text = format!("{HEADER}\n");
    for ((user, mechanism), c) in credentials {
        text.push_str(&format!(
            "{} {} {} {} {} {}\n",
            encode(user),
            mechanism.id(),
            c.iterations,
            BASE64.encode(&c.salt),
            BASE64.encode(&c.stored_key),
            BASE64.encode(&c.server_key)
        ));
    }
    text
}

fn parse(text: &str) -> Result<Credentials, String> {
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(format!("expected '{HEADER}' first"));
    }
    let mut out = Credentials::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let fields: Vec<&str> = line.split(' ').collect();
        let bad = || format!("malformed line '{line}'");
        let [user, mechanism, iterations, salt, stored, server] = fields[..] else {
            return Err(bad());
        };
        let mechanism = mechanism
            .parse()
            .ok()
            .and_then(ScramMechanism::from_id)
            .ok_or_else(bad)?;
        let bytes = |s: &str| BASE64.decode(s).map_err(|_| bad());
        out.insert(
            (decode(user).ok_or_else(bad)?, mechanism),
            ScramCredential {
                salt: bytes(salt)?,
                stored_key: bytes(stored)?,
                server_key: bytes(server)?,
                iterations: iterations.parse().map_err(|_| bad())?,
            },
        );
    }
    Ok(out)
}

/// Every byte outside `A-Z a-z 0-9 . _ -` as `%XX`.
pub fn encode(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_the_file_format() {
        let mut c = Credentials::new();
        c.insert(
            ("al ice=,".to_string(), ScramMechanism::Sha512),
            ScramCredential::from_password(ScramMechanism::Sha512, "pw", vec![1, 2, 3], 8192),
        );
        let text = format(&c);
        assert_eq!(parse(&text).unwrap(), c);
        assert!(parse("version: 9\n").is_err());
        assert!(parse("version: 0\nx 1 2\n").is_err());
    }
}
