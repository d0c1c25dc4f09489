//! The quota file, `<log.dirs>/client-quotas`: the quotas set through AlterClientQuotas, so they
//! survive a restart. Kafka keeps them in its metadata log; a single node needs only a file.
//!
//! The file is text. The first line is `version: 0`; every other line is one value:
//!
//! ```text
//! <entity> <key> <value>
//! client-id=my%20app producer_byte_rate 1048576
//! user=<default>,client-id=<default> request_percentage 12.5
//! ```
//!
//! The entity lists `user=` and `client-id=` (in that order), or `ip=`; names are percent-encoded (every
//! byte outside `A-Z a-z 0-9 . _ -`), and `<default>` is the default entity, which no encoded
//! name can be. Values are written in the shortest form that reads back to the same f64
//! (`inf` for an unlimited DOUBLE quota). The
//! file is replaced atomically (`Disk::write_file_durably`), never edited in place.

use std::path::Path;

use crate::disk::Disk;

use super::entity::{EntityName, QuotaEntity, QuotaKey, QuotaOverrides};

pub use crate::disk::names::QUOTA_FILE as QUOTA_FILE_NAME;
const HEADER: &str = "version: 0";
const DEFAULT_NAME: &str = "<default>";

/// Reads the quota file; a missing file means no quotas.
pub fn load(disk: &Disk, dir: &Path) -> anyhow::Result<QuotaOverrides> {
    let path = dir.join(QUOTA_FILE_NAME);
    let text = match disk.read_to_string_if_exists(&path) {
        Ok(Some(text)) => text,
        Ok(None) => return Ok(QuotaOverrides::default()),
        Err(e) => return Err(anyhow::anyhow!("{}: {e}", path.display())),
    };
    parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Replaces the quota file with `overrides`.
pub fn save(disk: &Disk, dir: &Path, overrides: &QuotaOverrides) -> std::io::Result<()> {
    disk.write_file_durably(&dir.join(QUOTA_FILE_NAME), format(overrides).as_bytes())
}

pub fn format(overrides: &QuotaOverrides) -> String {
    let mut text = format!("{HEADER}\n");
    for (entity, values) in &overrides.entities {
        let entity_text: Vec<String> = entity
            .components()
            .into_iter()
            .map(|(kind, name)| format!("{kind}={}", name.map_or(DEFAULT_NAME.into(), encode)))
            .collect();
        for (key, value) in values {
            text.push_str(&format!(
                "{} {} {value}\n",
                entity_text.join(","),
                key.name()
            ));
        }
    }
    text
}

pub fn parse(text: &str) -> Result<QuotaOverrides, String> {
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(format!("the first line is not '{HEADER}'"));
    }
    let mut overrides = QuotaOverrides::default();
    for (number, line) in lines.enumerate().map(|(i, l)| (i + 2, l)) {
        let fields: Vec<&str> = line.split(' ').collect();
        let [entity, key, value] = fields[..] else {
            return Err(format!("line {number}: expected '<entity> <key> <value>'"));
        };
        let entity = parse_entity(entity).map_err(|e| format!("line {number}: {e}"))?;
        let key =
            QuotaKey::from_name(key).ok_or_else(|| format!("line {number}: unknown key {key}"))?;
        let value: f64 = value
            .parse()
            .ok()
            .filter(|v: &f64| *v > 0.0)
            .ok_or_else(|| format!("line {number}: bad value {value}"))?;
        overrides
            .entities
            .entry(entity)
            .or_default()
            .insert(key, value);
    }
    Ok(overrides)
}

fn parse_entity(text: &str) -> Result<QuotaEntity, String> {
    let mut entity = QuotaEntity::default();
    for part in text.split(',') {
        let (kind, name) = part
            .split_once('=')
            .ok_or_else(|| format!("bad entity part '{part}'"))?;
        let name = if name == DEFAULT_NAME {
            EntityName::Default
        } else {
            EntityName::Named(decode(name)?)
        };
        let slot = match kind {
            super::entity::ENTITY_USER => &mut entity.user,
            super::entity::ENTITY_CLIENT_ID => &mut entity.client_id,
            super::entity::ENTITY_IP => &mut entity.ip,
            _ => return Err(format!("unknown entity type '{kind}'")),
        };
        if slot.replace(name).is_some() {
            return Err(format!("entity type '{kind}' twice"));
        }
    }
    if entity.components().is_empty() {
        return Err("empty entity".into());
    }
    if entity.ip.is_some() && (entity.user.is_some() || entity.client_id.is_some()) {
        return Err("an ip combined with a user or client id".into());
    }
    Ok(entity)
}

fn encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad escape in '{text}'"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("'{text}' is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_odd_names_and_exact_values() {
        let mut overrides = QuotaOverrides::default();
        let odd = QuotaEntity {
            client_id: Some(EntityName::Named("a b,c=d%<default>é\n".into())),
            ..QuotaEntity::default()
        };
        let both = QuotaEntity {
            user: Some(EntityName::Default),
            client_id: Some(EntityName::Default),
            ip: None,
        };
        let ip = QuotaEntity {
            ip: Some(EntityName::Named("::1".into())),
            ..QuotaEntity::default()
        };
        overrides
            .entities
            .entry(ip)
            .or_default()
            .insert(QuotaKey::ConnectionCreationRate, 7.0);
        overrides
            .entities
            .entry(odd)
            .or_default()
            .insert(QuotaKey::ProducerByteRate, 1_048_576.0);
        let values = overrides.entities.entry(both).or_default();
        values.insert(QuotaKey::RequestPercentage, 0.1 + 0.2);
        values.insert(QuotaKey::ConsumerByteRate, 9.007_199_254_740_993e15);
        values.insert(QuotaKey::ControllerMutationRate, f64::INFINITY);
        let text = format(&overrides);
        assert!(text.starts_with("version: 0\n"), "{text}");
        assert_eq!(text.lines().count(), 6, "{text}");
        assert_eq!(parse(&text).unwrap(), overrides);

        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            load(&Disk::real(), dir.path()).unwrap(),
            QuotaOverrides::default()
        );
        save(&Disk::real(), dir.path(), &overrides).unwrap();
        assert_eq!(load(&Disk::real(), dir.path()).unwrap(), overrides);
    }

    #[test]
    fn rejects_damaged_files() {
        for text in [
            "",
            "version: 1\n",
            "version: 0\nclient-id=a producer_byte_rate\n",
            "version: 0\nclient-id=a bogus_rate 1\n",
            "version: 0\nclient-id=a producer_byte_rate -1\n",
            "version: 0\nclient-id=a request_percentage NaN\n",
            "version: 0\ngroup=g producer_byte_rate 1\n",
            "version: 0\nip=1.2.3.4,user=u connection_creation_rate 1\n",
            "version: 0\nclient-id=%zz producer_byte_rate 1\n",
            "version: 0\nclient-id=a,client-id=b producer_byte_rate 1\n",
        ] {
            assert!(parse(text).is_err(), "{text:?}");
        }
    }
}
