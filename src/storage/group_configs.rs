//! Group configs (KIP-848's GROUP config resource: `kafka-configs --entity-type groups`): the
//! values set on each group id, kept whether or not the group exists, as Kafka keeps them.
//! Kafka stores them as `ConfigRecord`s in its metadata log; sluice keeps them in one small
//! file of the log directory, `sluice-group-configs`, replaced atomically whenever a group's
//! configs change (docs/log-format.md §13.8).
//!
//! Which names and values are allowed is `config::group::configs`'; the coordinator applies
//! them (`GroupCoordinator::set_group_configs`). A change is computed from the stored values,
//! written and handed on under one lock, so two concurrent changes cannot interleave.

use std::collections::BTreeMap;
use std::path::Path;

use super::LogManager;
use crate::disk::names::GROUP_CONFIGS_FILE;
use crate::disk::Disk;

/// Every group's configs, by group id.
pub type AllGroupConfigs = BTreeMap<String, BTreeMap<String, String>>;

/// Why a group-config change was not made.
#[derive(Debug)]
pub enum GroupConfigChangeError<E> {
    /// The change itself refused (a bad name or value).
    Refused(E),
    /// The file could not be written; nothing changed.
    Io(std::io::Error),
}

impl LogManager {
    /// One group's configs (empty when it has none).
    pub fn group_configs(&self, group_id: &str) -> BTreeMap<String, String> {
        self.lock_group_configs()
            .get(group_id)
            .cloned()
            .unwrap_or_default()
    }

    /// Every group with configs, and them.
    pub fn all_group_configs(&self) -> AllGroupConfigs {
        self.lock_group_configs().clone()
    }

    /// Replaces a group's configs with what `change` makes of the current ones. Unless
    /// `validate_only`, the file is rewritten, and then `apply` gets the new configs, all under
    /// the lock of the stored configs.
    pub fn alter_group_configs<E>(
        &self,
        group_id: &str,
        validate_only: bool,
        change: impl FnOnce(BTreeMap<String, String>) -> Result<BTreeMap<String, String>, E>,
        apply: impl FnOnce(&BTreeMap<String, String>),
    ) -> Result<(), GroupConfigChangeError<E>> {
        let mut all = self.lock_group_configs();
        let current = all.get(group_id).cloned().unwrap_or_default();
        let updated = change(current).map_err(GroupConfigChangeError::Refused)?;
        if validate_only {
            return Ok(());
        }
        let mut next = all.clone();
        if updated.is_empty() {
            next.remove(group_id);
        } else {
            next.insert(group_id.to_string(), updated.clone());
        }
        write(&self.disk, &self.log_dir, &next).map_err(GroupConfigChangeError::Io)?;
        *all = next;
        apply(&updated);
        tracing::info!(group_id, configs = ?updated, "group configs changed");
        Ok(())
    }

    fn lock_group_configs(&self) -> std::sync::MutexGuard<'_, AllGroupConfigs> {
        self.group_configs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Reads `sluice-group-configs`; a line that does not follow the format stops start-up with
/// its number, since skipping it would silently drop a group's settings.
pub(super) fn read(disk: &Disk, dir: &Path) -> std::io::Result<AllGroupConfigs> {
    let invalid = |line: usize, why: String| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{GROUP_CONFIGS_FILE} line {line}: {why}"),
        )
    };
    let mut all = AllGroupConfigs::new();
    let Some(text) = disk.read_to_string_if_exists(&dir.join(GROUP_CONFIGS_FILE))? else {
        return Ok(all);
    };
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let (group, pair) = line
            .split_once(' ')
            .ok_or_else(|| invalid(number, "no space after the group id".into()))?;
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| invalid(number, "no '=' after the key".into()))?;
        let group = decode(group).map_err(|why| invalid(number, why))?;
        let value = decode(value).map_err(|why| invalid(number, why))?;
        all.entry(group).or_default().insert(key.to_string(), value);
    }
    Ok(all)
}

fn write(disk: &Disk, dir: &Path, all: &AllGroupConfigs) -> std::io::Result<()> {
    let mut text = String::new();
    for (group, configs) in all {
        for (key, value) in configs {
            text.push_str(&format!("{} {key}={}\n", encode(group), encode(value)));
        }
    }
    disk.write_file_durably(&dir.join(GROUP_CONFIGS_FILE), text.as_bytes())
}

/// `%XX` (upper-case hex) for every byte outside `A-Z a-z 0-9 . _ - : , +`: a group id may hold
/// spaces, `=` and line breaks, a string value too.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-' | b':' | b',' | b'+') {
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
    fn odd_group_ids_and_values_survive_a_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut all = AllGroupConfigs::new();
        let configs = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        all.insert(
            "a group = with\nodd bytes % é".into(),
            configs(&[("consumer.session.timeout.ms", "20000")]),
        );
        all.insert(
            "plain".into(),
            configs(&[
                ("share.auto.offset.reset", "by_duration:PT1H"),
                ("errors.deadletterqueue.topic.name", "dlq topic\n=x"),
            ]),
        );
        write(&Disk::real(), dir.path(), &all).unwrap();
        let text = Disk::real()
            .read_to_string_if_exists(&dir.path().join(GROUP_CONFIGS_FILE))
            .unwrap()
            .unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.contains("plain share.auto.offset.reset=by_duration:PT1H\n"));
        assert_eq!(read(&Disk::real(), dir.path()).unwrap(), all);
    }

    #[test]
    fn a_damaged_line_stops_start_up() {
        let dir = tempfile::tempdir().unwrap();
        Disk::real()
            .write_file_durably(&dir.path().join(GROUP_CONFIGS_FILE), b"g a=1\nbroken\n")
            .unwrap();
        let error = read(&Disk::real(), dir.path()).unwrap_err();
        assert!(error.to_string().contains("line 2"), "{error}");
    }
}
