//! Every name sluice gives a file or directory in its log directory, in one place. Kafka's
//! names first (its tools and a future Kafka replica read them): partition directories
//! `<topic>-<partition>`, files named by an offset as 20 zero-padded digits and a suffix
//! (segments, indexes, producer snapshots, and their `.deleted`, `.cleaned` and `.swap` forms),
//! the checkpoint files, `partition.metadata`, `meta.properties`, `.lock` and the clean-shutdown
//! marker; then sluice's own small files, which Kafka keeps in its metadata log instead.
//! `docs/log-format.md` describes what each file holds.

use std::path::{Path, PathBuf};

/// A segment's records.
pub const LOG_SUFFIX: &str = ".log";
/// A segment's sparse offset index.
pub const INDEX_SUFFIX: &str = ".index";
/// A segment's sparse time index.
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";
/// A segment's aborted-transaction index (removed with its segment; not written yet).
pub const TXN_INDEX_SUFFIX: &str = ".txnindex";
/// Producer state as of an offset.
pub const SNAPSHOT_SUFFIX: &str = ".snapshot";
/// Appended to a removed segment's files until they are deleted.
pub const DELETED_SUFFIX: &str = ".deleted";
/// Appended to compaction output while it is written (`<base>.log.cleaned`).
pub const CLEANED_SUFFIX: &str = ".cleaned";
/// Appended to finished compaction output until it replaces its old segments.
pub const SWAP_SUFFIX: &str = ".swap";
/// Appended to a small file's new contents before they are renamed over it.
pub const TEMP_SUFFIX: &str = ".tmp";

/// In a partition directory: `version: 0` and the topic id.
pub const PARTITION_METADATA: &str = "partition.metadata";
/// In a partition directory: where each leader epoch starts.
pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";

/// In the log directory: the node and cluster ids.
pub const META_PROPERTIES: &str = "meta.properties";
/// In the log directory: held locked while a broker uses it.
pub const LOCK_FILE: &str = ".lock";
/// In the log directory: present only after a clean shutdown.
pub const CLEAN_SHUTDOWN_MARKER: &str = ".kafka_cleanshutdown";
/// In the log directory: each partition's recovery point.
pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
/// In the log directory: each partition's log start offset, where it is past the first segment.
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
/// In the log directory: each partition's high watermark.
pub const REPLICATION_OFFSET_CHECKPOINT: &str = "replication-offset-checkpoint";
/// In the log directory: how far each compacted partition has been cleaned.
pub const CLEANER_OFFSET_CHECKPOINT: &str = "cleaner-offset-checkpoint";

/// sluice's own: the configs set on each topic.
pub const TOPIC_CONFIGS_FILE: &str = "sluice-topic-configs";
/// sluice's own: dynamic broker configs (per broker and cluster default).
pub const BROKER_CONFIGS_FILE: &str = "sluice-broker-configs";
/// sluice's own: the configs set on each group id (the GROUP config resource).
pub const GROUP_CONFIGS_FILE: &str = "sluice-group-configs";
/// sluice's own: the block of producer ids handed out so far.
pub const PRODUCER_ID_BLOCK_FILE: &str = "sluice-producer-id-block";
/// sluice's own: client quotas.
pub const QUOTA_FILE: &str = "client-quotas";
/// SCRAM credentials set through AlterUserScramCredentials (`security::scram_store`).
pub const SCRAM_CREDENTIALS_FILE: &str = "sluice-scram-credentials";
/// ACLs set through CreateAcls (`security::acl_store`).
pub const ACLS_FILE: &str = "sluice-acls";

/// Suffix of a partition directory being deleted: `<topic>-<partition>.<topic id>-delete`.
pub const DELETE_DIR_SUFFIX: &str = "-delete";
/// Suffixes of Kafka's partition directories that are not live partitions: being deleted,
/// being moved between log directories, or left behind by a reassignment.
const NOT_LIVE_DIR_SUFFIXES: [&str; 3] = [DELETE_DIR_SUFFIX, "-future", "-stray"];

/// `<dir>/<offset as 20 digits><suffix>`: Kafka's name for segment files and snapshots.
pub fn offset_file(dir: &Path, offset: i64, suffix: &str) -> PathBuf {
    dir.join(format!("{offset:020}{suffix}"))
}

/// The offset of a file named `<digits><suffix>`; None for any other name.
pub fn offset_of_file(name: &str, suffix: &str) -> Option<i64> {
    let stem = name.strip_suffix(suffix)?;
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// `path` with `suffix` appended to its file name (`a.log` → `a.log.deleted`).
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

/// A live partition's directory name.
pub fn partition_dir(topic: &str, partition: i32) -> String {
    format!("{topic}-{partition}")
}

/// The name a partition directory takes while its topic is deleted.
pub fn deleted_partition_dir(topic: &str, partition: i32, topic_id_hex: &str) -> String {
    format!("{topic}-{partition}.{topic_id_hex}{DELETE_DIR_SUFFIX}")
}

/// `(topic, partition)` of a live partition directory's name. The topic is not validated here.
pub fn parse_partition_dir(name: &str) -> Option<(&str, i32)> {
    if NOT_LIVE_DIR_SUFFIXES.iter().any(|s| name.ends_with(s)) {
        return None;
    }
    let (topic, partition) = name.rsplit_once('-')?;
    let partition: i32 = partition.parse().ok()?;
    (partition >= 0).then_some((topic, partition))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_files_round_trip() {
        let path = offset_file(Path::new("/d"), 42, LOG_SUFFIX);
        assert_eq!(path, Path::new("/d/00000000000000000042.log"));
        let name = path.file_name().unwrap().to_str().unwrap();
        assert_eq!(offset_of_file(name, LOG_SUFFIX), Some(42));
        assert_eq!(offset_of_file(name, INDEX_SUFFIX), None);
        assert_eq!(offset_of_file("x42.log", LOG_SUFFIX), None);
        assert_eq!(offset_of_file(".log", LOG_SUFFIX), None);
        assert_eq!(
            with_suffix(&path, DELETED_SUFFIX),
            Path::new("/d/00000000000000000042.log.deleted")
        );
    }

    #[test]
    fn partition_directories() {
        assert_eq!(partition_dir("a-b", 3), "a-b-3");
        assert_eq!(parse_partition_dir("a-b-3"), Some(("a-b", 3)));
        assert_eq!(parse_partition_dir("t-x"), None);
        assert_eq!(parse_partition_dir("t"), None);
        let deleted = deleted_partition_dir("t", 0, "abc");
        assert_eq!(deleted, "t-0.abc-delete");
        assert_eq!(parse_partition_dir(&deleted), None);
        assert_eq!(parse_partition_dir("t-0.x-future"), None);
    }
}
