//! The set of partition logs in the log directory (Kafka's LogManager): `meta.properties`, the
//! directory lock, topic directories `<topic>-<partition>/` with `partition.metadata`, the
//! recovery-point, replication-offset (high watermark) and log-start-offset checkpoints, and the
//! `.kafka_cleanshutdown` marker.
//!
//! It owns the topic registry (name → topic id and partitions) and creates and deletes topics.
//! It sees batch bytes and offsets, never request types. Appends wake long-polling fetches
//! through their partition's `Notify` (`Partition::appended`).

pub mod broker_config;
mod cleaning;
pub mod consumer_offsets;
mod errors;
mod group_topics;
mod layout;
mod maintenance;
mod partition;
mod replay;
mod topic;
mod topic_settings;
pub mod transaction_markers;
pub mod transaction_state;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use uuid::Uuid;

use crate::config::Config;
use crate::disk::{Disk, File};
use crate::log::checkpoint::{read_checkpoint, write_checkpoint};
pub use crate::log::AbortedTxn;
pub use crate::log::SegmentSlice;
use crate::log::{LogError, OpenOptions, PartitionLog};
use crate::producer::id_allocator::ProducerIdAllocator;
pub use crate::producer::SequenceError;
pub use crate::record_batch::control::TxnMarker;
use broker_config::{BrokerConfigError, DynamicBrokerConfigs};
pub use errors::{PartitionError, TopicError};
pub use partition::{
    ActiveProducer, Isolation, LogStats, Partition, PartitionOffsets, PartitionRead, ProducedBatch,
    TxnVerification,
};
pub use topic::{validate_topic_name, Topic};
pub use topic_settings::{TopicConfigs, TopicSettings};
pub use transaction_markers::{MarkerError, MarkerWriter};

use maintenance::checkpoint_map;

use crate::disk::names::{
    self, CLEANER_OFFSET_CHECKPOINT, CLEAN_SHUTDOWN_MARKER, LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
};

/// All partition logs of the broker's one log directory.
pub struct LogManager {
    /// Every file of the log directory is read and written through it; it also knows whether
    /// the directory went offline after a storage failure.
    disk: Disk,
    log_dir: PathBuf,
    /// The configuration from `server.properties` and the command line.
    config: Arc<Config>,
    /// Dynamic broker configs and the configuration in force with them applied over `config`;
    /// swapped together, under the topics' write lock, so topic settings always derive from
    /// the `Config` published here.
    dynamic: RwLock<(DynamicBrokerConfigs, Arc<Config>)>,
    cluster_id: String,
    topics: RwLock<HashMap<String, Arc<Topic>>>,
    producer_ids: ProducerIdAllocator,
    /// Where each compacted partition's cleaning has reached (`cleaner-offset-checkpoint`).
    cleaner_checkpoints: std::sync::Mutex<HashMap<(String, i32), i64>>,
    /// Held while the checkpoints are written: two writers would share their `.tmp` files.
    checkpoint_write: std::sync::Mutex<()>,
    /// Held by a cleaner pass: one at a time.
    cleaner_pass: std::sync::Mutex<()>,
    /// Set at shutdown: a pass stops after the partition it is on.
    cleaner_stopping: std::sync::atomic::AtomicBool,
    /// Topics created since start-up: the version the group coordinator's regular expressions
    /// compare with (`group_topics.rs`).
    topics_created: std::sync::atomic::AtomicI64,
    /// Held for the life of the broker so a second broker cannot open the same directory.
    _lock_file: File,
}

impl LogManager {
    /// Opens the log directory, recovering every log when the last shutdown was not clean.
    pub fn open(config: Arc<Config>, disk: Disk, now_ms: i64) -> anyhow::Result<LogManager> {
        let log_dir = config.log_dir.clone();
        disk.create_dir_all(&log_dir)?;
        let lock_file = layout::lock_directory(&disk, &log_dir)?;
        let cluster_id = layout::read_or_write_meta_properties(&disk, &log_dir, config.node_id)?;
        // Deleted before any log loads: a crash while loading must count as unclean.
        let marker = log_dir.join(CLEAN_SHUTDOWN_MARKER);
        let clean_shutdown = disk.exists(&marker);
        if clean_shutdown {
            disk.remove_file(&marker)?;
            disk.sync_dir(&log_dir)?;
        }
        let recovery_points = checkpoint_map(read_checkpoint(
            &disk,
            &log_dir.join(RECOVERY_POINT_CHECKPOINT),
        ));
        let log_starts = checkpoint_map(read_checkpoint(
            &disk,
            &log_dir.join(LOG_START_OFFSET_CHECKPOINT),
        ));
        let cleaner_checkpoint = log_dir.join(CLEANER_OFFSET_CHECKPOINT);
        let cleaner_checkpoints = checkpoint_map(read_checkpoint(&disk, &cleaner_checkpoint));
        if !disk.exists(&cleaner_checkpoint) {
            // Kafka's log cleaner creates it, empty, at start-up; so the log directory holds
            // the same files, written or not.
            write_checkpoint(&disk, &cleaner_checkpoint, &[])?;
        }
        let topic_configs = topic::read_topic_configs(&disk, &log_dir)?;
        let dynamic = DynamicBrokerConfigs::read(&disk, &log_dir)?;
        // Kafka logs and skips dynamic configs it cannot apply rather than refusing to start.
        let effective = Arc::new(
            config
                .with_dynamic(&dynamic.merged(config.node_id))
                .unwrap_or_else(|e| {
                    tracing::error!("ignoring the dynamic broker configs: {e}");
                    (*config).clone()
                }),
        );
        layout::remove_deleted_topic_dirs(&disk, &log_dir);

        let mut grouped: BTreeMap<String, Vec<(i32, PathBuf)>> = BTreeMap::new();
        for (topic, partition, dir) in layout::partition_dirs(&disk, &log_dir)? {
            grouped.entry(topic).or_default().push((partition, dir));
        }
        let mut topics = HashMap::new();
        for (name, mut dirs) in grouped {
            dirs.sort_by_key(|(p, _)| *p);
            let configs =
                TopicConfigs::from_map(topic_configs.get(&name).cloned().unwrap_or_default());
            let settings = configs.settings(&effective);
            let log_config = settings.log.clone();
            let mut partitions = Vec::with_capacity(dirs.len());
            // A partition whose `partition.metadata` is lost takes the id its siblings hold,
            // whichever partition that is.
            let mut topic_id = dirs
                .iter()
                .find_map(|(_, dir)| layout::read_topic_id(&disk, dir).ok().flatten());
            for (expected, (index, dir)) in dirs.into_iter().enumerate() {
                if index != expected as i32 {
                    anyhow::bail!("topic {name}: partition directory {index} found where {expected} was expected");
                }
                let id = layout::read_or_write_partition_metadata(&disk, &dir, topic_id)?;
                topic_id.get_or_insert(id);
                let key = (name.clone(), index);
                let options = OpenOptions {
                    recovery_point: recovery_points.get(&key).copied().unwrap_or(0),
                    log_start_offset: log_starts.get(&key).copied().unwrap_or(0),
                    clean_shutdown,
                };
                let log = PartitionLog::open(&disk, &dir, log_config.clone(), options, now_ms)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
                let partition =
                    Partition::new(name.clone(), index, dir.clone(), log).map_err(|e| {
                        anyhow::anyhow!("{}: rebuilding producer state: {e}", dir.display())
                    })?;
                partitions.push(Arc::new(partition));
            }
            let id = topic_id.unwrap_or_else(Uuid::new_v4);
            topics.insert(
                name.clone(),
                Arc::new(Topic::new(name, id, partitions, settings)),
            );
        }
        tracing::info!(dir = %log_dir.display(), topics = topics.len(), clean_shutdown, "log directory loaded");
        let config_log_dir = log_dir.clone();
        let producer_ids = ProducerIdAllocator::open(&disk, &config_log_dir)?;
        Ok(LogManager {
            disk,
            log_dir,
            config,
            dynamic: RwLock::new((dynamic, effective)),
            cluster_id,
            topics: RwLock::new(topics),
            producer_ids,
            cleaner_checkpoints: std::sync::Mutex::new(cleaner_checkpoints),
            checkpoint_write: std::sync::Mutex::new(()),
            cleaner_pass: std::sync::Mutex::new(()),
            cleaner_stopping: std::sync::atomic::AtomicBool::new(false),
            topics_created: std::sync::atomic::AtomicI64::new(0),
            _lock_file: lock_file,
        })
    }

    /// The configuration in force: `server.properties` with dynamic broker configs over it.
    pub fn broker_config(&self) -> Arc<Config> {
        self.dynamic
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .clone()
    }

    pub fn dynamic_broker_configs(&self) -> DynamicBrokerConfigs {
        self.dynamic
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .clone()
    }

    /// Replaces one entity's dynamic broker configs ("" for the cluster default), persists
    /// them, and re-derives every topic's settings at once, so topics without an override
    /// follow a new default without a restart.
    pub fn alter_broker_configs(
        &self,
        entity: &str,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), BrokerConfigError> {
        broker_config::check(&configs)?;
        let topics = self.topics.write().unwrap_or_else(|e| e.into_inner());
        let mut dynamic = self.dynamic_broker_configs();
        dynamic.set_entity(entity, configs);
        let effective = self
            .config
            .with_dynamic(&dynamic.merged(self.config.node_id))
            .map_err(|e| BrokerConfigError::InvalidValue(e.to_string()))?;
        if validate_only {
            return Ok(());
        }
        dynamic
            .write(&self.disk, &self.log_dir)
            .map_err(|e| BrokerConfigError::InvalidValue(format!("cannot persist: {e}")))?;
        let effective = Arc::new(effective);
        *self.dynamic.write().unwrap_or_else(|e| e.into_inner()) = (dynamic, effective.clone());
        for topic in topics.values() {
            let settings = topic.settings().overrides.settings(&effective);
            apply_settings(topic, settings);
        }
        tracing::info!(
            entity = if entity.is_empty() {
                "<default>"
            } else {
                entity
            },
            "altered dynamic broker configs"
        );
        Ok(())
    }

    pub fn producer_ids(&self) -> &ProducerIdAllocator {
        &self.producer_ids
    }

    /// The storage handle of the log directory.
    pub fn disk(&self) -> &Disk {
        &self.disk
    }

    /// True once a storage failure took the log directory offline: every partition answers
    /// KAFKA_STORAGE_ERROR until a restart.
    pub fn is_offline(&self) -> bool {
        self.disk.is_offline()
    }

    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    pub fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<Arc<Topic>> {
        let topics = self.topics.read().unwrap_or_else(|e| e.into_inner());
        topics.values().find(|t| t.id == id).cloned()
    }

    /// Every topic, ordered by name.
    pub fn topics(&self) -> Vec<Arc<Topic>> {
        let topics = self.topics.read().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<_> = topics.values().cloned().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// Creates a topic: directories, `partition.metadata` first, then empty logs.
    pub fn create_topic(
        &self,
        name: &str,
        num_partitions: i32,
        configs: TopicConfigs,
        now_ms: i64,
    ) -> Result<Arc<Topic>, TopicError> {
        validate_topic_name(name)?;
        self.check_partition_count(num_partitions)?;
        let mut topics = self.topics.write().unwrap_or_else(|e| e.into_inner());
        if topics.contains_key(name) {
            return Err(TopicError::AlreadyExists);
        }
        let id = Uuid::new_v4();
        let settings = configs.settings(&self.broker_config());
        // Configs first: a topic directory never exists without its saved configs. (An entry
        // whose directories then fail is ignored at start-up and dropped by the next save.)
        let mut all = topic_config_maps(&topics);
        all.insert(name.to_string(), settings.overrides.to_map());
        topic::write_topic_configs(&self.disk, &self.log_dir, &all)
            .map_err(|e| TopicError::Storage(e.to_string()))?;
        let created = (0..num_partitions)
            .map(|index| self.open_new_partition(name, id, index, &settings, now_ms))
            .collect::<Result<Vec<_>, _>>();
        let partitions = match created {
            Ok(partitions) => partitions,
            Err(error) => {
                // The partitions opened so far are closed by now: remove every directory of
                // the failed topic, so a restart does not bring back a topic never created.
                for index in 0..num_partitions {
                    let dir = self.log_dir.join(names::partition_dir(name, index));
                    if let Err(e) = self.disk.remove_dir_all(&dir) {
                        if e.kind() != std::io::ErrorKind::NotFound {
                            tracing::error!(dir = %dir.display(), "cannot remove a partition of a failed topic creation: {e}");
                        }
                    }
                }
                return Err(error);
            }
        };
        let topic = Arc::new(Topic::new(name.to_string(), id, partitions, settings));
        topics.insert(name.to_string(), topic.clone());
        self.topics_created
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        tracing::info!(topic = name, partitions = num_partitions, %id, "created topic");
        Ok(topic)
    }

    /// Adds partitions to a topic (CreatePartitions); the count can only grow.
    pub fn create_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
        now_ms: i64,
    ) -> Result<(), TopicError> {
        let mut topics = self.topics.write().unwrap_or_else(|e| e.into_inner());
        let topic = topics.get(name).cloned().ok_or(TopicError::UnknownTopic)?;
        let current = topic.partitions.len() as i32;
        if count <= current {
            let message = if count == current {
                format!("Topic already has {current} partitions.")
            } else {
                format!("Topic currently has {current} partitions, which is higher than the requested {count}.")
            };
            return Err(TopicError::InvalidPartitions(message));
        }
        self.check_partition_count(count)?;
        if validate_only {
            return Ok(());
        }
        let settings = topic.settings();
        let mut partitions = topic.partitions.clone();
        for index in current..count {
            partitions.push(self.open_new_partition(name, topic.id, index, &settings, now_ms)?);
        }
        // The new directories' entries in the log directory must be durable before the new
        // partitions take acknowledged writes. CreateTopics gets this fsync from its
        // `sluice-topic-configs` write; nothing else here writes to the log directory.
        self.disk
            .sync_dir(&self.log_dir)
            .map_err(|e| TopicError::Storage(e.to_string()))?;
        let grown = Topic::new(
            topic.name.clone(),
            topic.id,
            partitions,
            (*settings).clone(),
        );
        topics.insert(name.to_string(), Arc::new(grown));
        tracing::info!(topic = name, from = current, to = count, "added partitions");
        Ok(())
    }

    /// Replaces a topic's config overrides: persisted first, then in effect at once. If they
    /// cannot be saved, the request fails and the old ones stay in force.
    pub fn alter_topic_configs(&self, name: &str, configs: TopicConfigs) -> Result<(), TopicError> {
        let topics = self.topics.write().unwrap_or_else(|e| e.into_inner());
        let topic = topics.get(name).ok_or(TopicError::UnknownTopic)?;
        let settings = configs.settings(&self.broker_config());
        let mut all = topic_config_maps(&topics);
        all.insert(name.to_string(), settings.overrides.to_map());
        topic::write_topic_configs(&self.disk, &self.log_dir, &all)
            .map_err(|e| TopicError::Storage(e.to_string()))?;
        apply_settings(topic, settings);
        tracing::info!(topic = name, "altered topic configs");
        Ok(())
    }

    fn check_partition_count(&self, count: i32) -> Result<(), TopicError> {
        let max = self.config.max_partitions_per_topic;
        if count > max {
            return Err(TopicError::InvalidPartitions(format!(
                "{count} partitions exceed this broker's sluice.max.partitions.per.topic of {max}"
            )));
        }
        Ok(())
    }

    fn open_new_partition(
        &self,
        name: &str,
        id: Uuid,
        index: i32,
        settings: &TopicSettings,
        now_ms: i64,
    ) -> Result<Arc<Partition>, TopicError> {
        let dir = self.log_dir.join(names::partition_dir(name, index));
        let open = || -> Result<Partition, LogError> {
            self.disk.create_dir_all(&dir)?;
            layout::write_partition_metadata(&self.disk, &dir, id)?;
            let options = OpenOptions {
                recovery_point: 0,
                log_start_offset: 0,
                clean_shutdown: true,
            };
            let log = PartitionLog::open(&self.disk, &dir, settings.log.clone(), options, now_ms)?;
            Partition::new(name.to_string(), index, dir.clone(), log)
        };
        open()
            .map(Arc::new)
            .map_err(|e| TopicError::Storage(e.to_string()))
    }

    fn persist_topic_configs(
        &self,
        topics: &HashMap<String, Arc<Topic>>,
    ) -> Result<(), TopicError> {
        topic::write_topic_configs(&self.disk, &self.log_dir, &topic_config_maps(topics))
            .map_err(|e| TopicError::Storage(e.to_string()))
    }

    /// Deletes a topic: its partitions stop serving at once, their directories are renamed
    /// `<topic>-<p>.<id>-delete` and removed, and the topic id is retired with them.
    pub fn delete_topic(&self, name: &str) -> Result<(), TopicError> {
        // Its directories could not be renamed: the topic would vanish now and come back at
        // the restart that brings the log directory online again.
        if self.is_offline() {
            return Err(TopicError::Storage(Disk::offline_error().to_string()));
        }
        let topic = {
            let mut topics = self.topics.write().unwrap_or_else(|e| e.into_inner());
            topics.remove(name).ok_or(TopicError::UnknownTopic)?
        };
        for partition in &topic.partitions {
            partition.retire();
            let renamed = self.log_dir.join(names::deleted_partition_dir(
                &topic.name,
                partition.index,
                &topic.id.simple().to_string(),
            ));
            if let Err(e) = self.disk.rename(&partition.dir, &renamed) {
                tracing::error!(dir = %partition.dir.display(), "cannot rename deleted partition: {e}");
                continue;
            }
            if let Err(e) = self.disk.remove_dir_all(&renamed) {
                tracing::error!(dir = %renamed.display(), "cannot remove deleted partition: {e}");
            }
        }
        self.persist_topic_configs(&self.topics.read().unwrap_or_else(|e| e.into_inner()))?;
        self.forget_cleaner_checkpoints(name);
        tracing::info!(topic = name, "deleted topic");
        Ok(())
    }

    /// Clean shutdown: close every log (flush, final time-index entry, trimmed indexes), write
    /// the checkpoints, and only then the clean-shutdown marker. Last, `.lock` is removed as
    /// Kafka removes it; the lock is held until the process exits.
    pub fn shutdown(&self) -> anyhow::Result<()> {
        let mut all_closed = true;
        for partition in self.all_partitions() {
            if let Err(e) = partition.snapshot_producers() {
                tracing::error!(partition = %partition, "producer snapshot failed: {e}");
                all_closed = false;
            }
            if let Err(e) = partition.with_state(|state| Ok(state.log.close()?)) {
                tracing::error!(partition = %partition, "close failed: {e}");
                all_closed = false;
            }
        }
        self.write_checkpoints()?;
        if all_closed {
            layout::write_clean_shutdown_marker(
                &self.disk,
                &self.log_dir.join(CLEAN_SHUTDOWN_MARKER),
            )?;
        }
        layout::remove_lock_file(&self.disk, &self.log_dir)?;
        Ok(())
    }

    fn all_partitions(&self) -> Vec<Arc<Partition>> {
        self.topics()
            .iter()
            .flat_map(|t| t.partitions.iter().cloned())
            .collect()
    }
}

/// Every topic's config overrides, as `sluice-topic-configs` stores them.
fn topic_config_maps(
    topics: &HashMap<String, Arc<Topic>>,
) -> BTreeMap<String, BTreeMap<String, String>> {
    topics
        .values()
        .map(|t| (t.name.clone(), t.settings().overrides.to_map()))
        .collect()
}

/// Gives a topic new settings: its partitions' logs first, then the topic's own.
fn apply_settings(topic: &Topic, settings: TopicSettings) {
    for partition in &topic.partitions {
        partition.set_log_config(settings.log.clone());
    }
    topic.set_settings(settings);
}
