//! Files of the log directory other than the logs themselves, in Kafka's formats:
//! `meta.properties`, `.lock`, `partition.metadata`, `.kafka_cleanshutdown`, and the naming of
//! partition directories.

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use uuid::Uuid;

use crate::config::parse_properties;
use crate::disk::{names, Disk, File};

/// Kafka writes ids as 22-character unpadded base64url of the UUID's 16 bytes.
pub fn encode_kafka_uuid(id: Uuid) -> String {
    URL_SAFE_NO_PAD.encode(id.as_bytes())
}

pub fn decode_kafka_uuid(text: &str) -> Option<Uuid> {
    let bytes = URL_SAFE_NO_PAD.decode(text.trim()).ok()?;
    Uuid::from_slice(&bytes).ok()
}

/// Takes an exclusive lock on `<dir>/.lock`, as Kafka does, so two brokers never share a directory.
pub fn lock_directory(disk: &Disk, dir: &Path) -> anyhow::Result<File> {
    let file = disk.open_or_create(&dir.join(names::LOCK_FILE))?;
    file.try_lock().map_err(|e| {
        anyhow::anyhow!(
            "log directory {} is in use by another process: {e}",
            dir.display()
        )
    })?;
    Ok(file)
}

/// Removes `<dir>/.lock` at the end of a clean shutdown, as Kafka does; the lock itself goes
/// when the process (or the `File` from `lock_directory`) does.
pub fn remove_lock_file(disk: &Disk, dir: &Path) -> std::io::Result<()> {
    disk.remove_file_if_exists(&dir.join(names::LOCK_FILE))
}

/// Reads `meta.properties` (KRaft v1) or writes a new one; returns the cluster id.
pub fn read_or_write_meta_properties(
    disk: &Disk,
    dir: &Path,
    node_id: i32,
) -> anyhow::Result<String> {
    let path = dir.join(names::META_PROPERTIES);
    if let Ok(text) = disk.read_to_string(&path) {
        let props = parse_properties(&text);
        let get = |k: &str| {
            props
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
        };
        if let Some(found) = get("node.id") {
            if found != node_id.to_string() {
                anyhow::bail!(
                    "{}: node.id {found} does not match configured node.id {node_id}",
                    path.display()
                );
            }
        }
        return get("cluster.id")
            .ok_or_else(|| anyhow::anyhow!("{}: no cluster.id", path.display()));
    }
    let cluster_id = encode_kafka_uuid(Uuid::new_v4());
    let directory_id = encode_kafka_uuid(Uuid::new_v4());
    let text = format!(
        "#\n#Written by sluice\nnode.id={node_id}\ndirectory.id={directory_id}\nversion=1\ncluster.id={cluster_id}\n"
    );
    disk.write_file_durably(&path, text.as_bytes())?;
    Ok(cluster_id)
}

/// `partition.metadata`: `version: 0` and the topic id, byte for byte as Kafka writes it (no
/// newline after the id). Written before any data is appended.
pub fn write_partition_metadata(disk: &Disk, dir: &Path, topic_id: Uuid) -> std::io::Result<()> {
    let text = format!("version: 0\ntopic_id: {}", encode_kafka_uuid(topic_id));
    disk.write_file_durably(&dir.join(names::PARTITION_METADATA), text.as_bytes())
}

/// The topic id a partition directory's `partition.metadata` holds; `None` if it has none.
/// Files with a newline after the id (as sluice wrote them before) read the same.
pub fn read_topic_id(disk: &Disk, dir: &Path) -> anyhow::Result<Option<Uuid>> {
    let path = dir.join(names::PARTITION_METADATA);
    let Ok(text) = disk.read_to_string(&path) else {
        return Ok(None);
    };
    parse_properties(&text)
        .into_iter()
        .find(|(k, _)| k == "topic_id")
        .and_then(|(_, v)| decode_kafka_uuid(&v))
        .map(Some)
        .ok_or_else(|| anyhow::anyhow!("{}: no valid topic_id", path.display()))
}

/// The topic id of a partition directory; one is written if the file is missing, reusing the
/// id of the topic's other partitions when known.
pub fn read_or_write_partition_metadata(
    disk: &Disk,
    dir: &Path,
    known: Option<Uuid>,
) -> anyhow::Result<Uuid> {
    if let Some(id) = read_topic_id(disk, dir)? {
        if let Some(known) = known {
            if known != id {
                anyhow::bail!(
                    "{}: topic id {id} differs from the topic's {known}",
                    dir.join(names::PARTITION_METADATA).display()
                );
            }
        }
        return Ok(id);
    }
    let id = known.unwrap_or_else(Uuid::new_v4);
    write_partition_metadata(disk, dir, id)?;
    Ok(id)
}

/// `<topic>-<partition>` directories; anything else (the deleted `*-delete`, Kafka's `-future`
/// and `-stray`, files) is not a live partition.
pub fn partition_dirs(disk: &Disk, dir: &Path) -> std::io::Result<Vec<(String, i32, PathBuf)>> {
    let mut found = Vec::new();
    for entry in disk.list_dir(dir)? {
        if !entry.is_dir {
            continue;
        }
        if let Some((topic, partition)) = parse_partition_dir_name(entry.name()) {
            found.push((topic, partition, entry.path));
        }
    }
    Ok(found)
}

pub fn parse_partition_dir_name(name: &str) -> Option<(String, i32)> {
    let (topic, partition) = names::parse_partition_dir(name)?;
    super::validate_topic_name(topic)
        .is_ok()
        .then(|| (topic.to_string(), partition))
}

/// Finishes deletions interrupted by a crash.
pub fn remove_deleted_topic_dirs(disk: &Disk, dir: &Path) {
    let Ok(entries) = disk.list_dir(dir) else {
        return;
    };
    for entry in entries {
        if entry.name().ends_with(names::DELETE_DIR_SUFFIX) {
            if let Err(e) = disk.remove_dir_all(&entry.path) {
                tracing::warn!(dir = %entry.path.display(), "cannot remove deleted partition: {e}");
            }
        }
    }
}

pub fn write_clean_shutdown_marker(disk: &Disk, path: &Path) -> std::io::Result<()> {
    disk.write_file_durably(path, br#"{"version":0,"brokerEpoch":0}"#)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_uuid_round_trip() {
        let id = Uuid::new_v4();
        let text = encode_kafka_uuid(id);
        assert_eq!(text.len(), 22);
        assert_eq!(decode_kafka_uuid(&text), Some(id));
    }

    #[test]
    fn partition_metadata_is_kafkas_bytes_and_old_files_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let id = decode_kafka_uuid("eVA65AtiQ7W8mmgS9VDvjQ").unwrap();
        write_partition_metadata(&Disk::real(), dir.path(), id).unwrap();
        let path = dir.path().join("partition.metadata");
        // What Kafka 4.1 writes: no newline after the id.
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"version: 0\ntopic_id: eVA65AtiQ7W8mmgS9VDvjQ"
        );
        assert_eq!(read_topic_id(&Disk::real(), dir.path()).unwrap(), Some(id));
        std::fs::write(&path, "version: 0\ntopic_id: eVA65AtiQ7W8mmgS9VDvjQ\n").unwrap();
        assert_eq!(read_topic_id(&Disk::real(), dir.path()).unwrap(), Some(id));
    }

    #[test]
    fn partition_dir_names() {
        assert_eq!(
            parse_partition_dir_name("my-topic-12"),
            Some(("my-topic".into(), 12))
        );
        assert_eq!(parse_partition_dir_name("t-0.abc-delete"), None);
        assert_eq!(parse_partition_dir_name("notapartition"), None);
        assert_eq!(parse_partition_dir_name("t-x"), None);
        assert_eq!(parse_partition_dir_name("t--1"), Some(("t-".into(), 1)));
    }

    #[test]
    fn meta_properties_is_stable_and_checks_node_id() {
        let dir = tempfile::tempdir().unwrap();
        let first = read_or_write_meta_properties(&Disk::real(), dir.path(), 1).unwrap();
        assert_eq!(
            read_or_write_meta_properties(&Disk::real(), dir.path(), 1).unwrap(),
            first
        );
        assert!(read_or_write_meta_properties(&Disk::real(), dir.path(), 2).is_err());
    }
}
