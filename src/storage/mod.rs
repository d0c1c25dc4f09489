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
mod layout;
pub mod topic_config;
pub use layout::write_file_durably;
mod topic;

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use uuid::Uuid;

use crate::config::Config;
use crate::log::checkpoint::{read_checkpoint, write_checkpoint};
use crate::log::{LogError, OpenOptions, PartitionLog};
use crate::producer::id_allocator::ProducerIdAllocator;
use broker_config::{BrokerConfigError, DynamicBrokerConfigs};
pub use topic::{
    validate_topic_name, Partition, PartitionError, PartitionState, Topic, TopicConfigs,
    TopicError, TopicSettings, LEADER_EPOCH,
};

const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
/// Kafka's high-watermark checkpoint; written for Kafka's tools and brokers, never read here.
const REPLICATION_OFFSET_CHECKPOINT: &str = "replication-offset-checkpoint";
const CLEAN_SHUTDOWN_MARKER: &str = ".kafka_cleanshutdown";

/// All partition logs of the broker's one log directory.
pub struct LogManager {
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
    /// Held by a cleaner pass: one at a time.
    cleaner_pass: std::sync::Mutex<()>,
    /// Set at shutdown: a pass stops after the partition it is on.
    cleaner_stopping: std::sync::atomic::AtomicBool,
    /// Held for the life of the broker so a second broker cannot open the same directory.
    _lock_file: File,
}

impl LogManager {
    /// Opens the log directory, recovering every log when the last shutdown was not clean.
    pub fn open(config: Arc<Config>, now_ms: i64) -> anyhow::Result<LogManager> {
        let log_dir = config.log_dir.clone();
        std::fs::create_dir_all(&log_dir)?;
        let lock_file = layout::lock_directory(&log_dir)?;
        let cluster_id = layout::read_or_write_meta_properties(&log_dir, config.node_id)?;
        // Deleted before any log loads: a crash while loading must count as unclean.
        let marker = log_dir.join(CLEAN_SHUTDOWN_MARKER);
        let clean_shutdown = marker.exists();
        if clean_shutdown {
            std::fs::remove_file(&marker)?;
            layout::fsync_dir(&log_dir)?;
        }
        let recovery_points =
            checkpoint_map(read_checkpoint(&log_dir.join(RECOVERY_POINT_CHECKPOINT)));
        let log_starts =
            checkpoint_map(read_checkpoint(&log_dir.join(LOG_START_OFFSET_CHECKPOINT)));
        let cleaner_checkpoint = log_dir.join(cleaning::CLEANER_OFFSET_CHECKPOINT);
        let cleaner_checkpoints = checkpoint_map(read_checkpoint(&cleaner_checkpoint));
        if !cleaner_checkpoint.exists() {
            // Kafka's log cleaner creates it, empty, at start-up; so the log directory holds
            // the same files, written or not.
            write_checkpoint(&cleaner_checkpoint, &[])?;
        }
        let topic_configs = topic::read_topic_configs(&log_dir)?;
        let dynamic = DynamicBrokerConfigs::read(&log_dir)?;
        // Kafka logs and skips dynamic configs it cannot apply rather than refusing to start.
        let effective = Arc::new(
            config
                .with_dynamic(&dynamic.merged(config.node_id))
                .unwrap_or_else(|e| {
                    tracing::error!("ignoring the dynamic broker configs: {e}");
                    (*config).clone()
                }),
        );
        layout::remove_deleted_topic_dirs(&log_dir);

        let mut grouped: BTreeMap<String, Vec<(i32, PathBuf)>> = BTreeMap::new();
        for (topic, partition, dir) in layout::partition_dirs(&log_dir)? {
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
                .find_map(|(_, dir)| layout::read_topic_id(dir).ok().flatten());
            for (expected, (index, dir)) in dirs.into_iter().enumerate() {
                if index != expected as i32 {
                    anyhow::bail!("topic {name}: partition directory {index} found where {expected} was expected");
                }
                let id = layout::read_or_write_partition_metadata(&dir, topic_id)?;
                topic_id.get_or_insert(id);
                let key = (name.clone(), index);
                let options = OpenOptions {
                    recovery_point: recovery_points.get(&key).copied().unwrap_or(0),
                    log_start_offset: log_starts.get(&key).copied().unwrap_or(0),
                    clean_shutdown,
                };
                let log = PartitionLog::open(&dir, log_config.clone(), options, now_ms)
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
        Ok(LogManager {
            log_dir,
            config,
            dynamic: RwLock::new((dynamic, effective)),
            cluster_id,
            topics: RwLock::new(topics),
            producer_ids: ProducerIdAllocator::open(&config_log_dir)?,
            cleaner_checkpoints: std::sync::Mutex::new(cleaner_checkpoints),
            cleaner_pass: std::sync::Mutex::new(()),
            cleaner_stopping: std::sync::atomic::AtomicBool::new(false),
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
            .write(&self.log_dir)
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
        topic::write_topic_configs(&self.log_dir, &all)
            .map_err(|e| TopicError::Storage(e.to_string()))?;
        let partitions = (0..num_partitions)
            .map(|index| self.open_new_partition(name, id, index, &settings, now_ms))
            .collect::<Result<Vec<_>, _>>()?;
        let topic = Arc::new(Topic::new(name.to_string(), id, partitions, settings));
        topics.insert(name.to_string(), topic.clone());
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
        layout::fsync_dir(&self.log_dir).map_err(|e| TopicError::Storage(e.to_string()))?;
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
        topic::write_topic_configs(&self.log_dir, &all)
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
        let dir = self.log_dir.join(format!("{name}-{index}"));
        let open = || -> Result<Partition, LogError> {
            std::fs::create_dir_all(&dir)?;
            layout::write_partition_metadata(&dir, id)?;
            let options = OpenOptions {
                recovery_point: 0,
                log_start_offset: 0,
                clean_shutdown: true,
            };
            let log = PartitionLog::open(&dir, settings.log.clone(), options, now_ms)?;
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
        topic::write_topic_configs(&self.log_dir, &topic_config_maps(topics))
            .map_err(|e| TopicError::Storage(e.to_string()))
    }

    /// Deletes a topic: its partitions stop serving at once, their directories are renamed
    /// `<topic>-<p>.<id>-delete` and removed, and the topic id is retired with them.
    pub fn delete_topic(&self, name: &str) -> Result<(), TopicError> {
        let topic = {
            let mut topics = self.topics.write().unwrap_or_else(|e| e.into_inner());
            topics.remove(name).ok_or(TopicError::UnknownTopic)?
        };
        for partition in &topic.partitions {
            partition.retire();
            let renamed = self.log_dir.join(format!(
                "{}-{}.{}-delete",
                topic.name,
                partition.index,
                topic.id.simple()
            ));
            if let Err(e) = std::fs::rename(&partition.dir, &renamed) {
                tracing::error!(dir = %partition.dir.display(), "cannot rename deleted partition: {e}");
                continue;
            }
            if let Err(e) = std::fs::remove_dir_all(&renamed) {
                tracing::error!(dir = %renamed.display(), "cannot remove deleted partition: {e}");
            }
        }
        self.persist_topic_configs(&self.topics.read().unwrap_or_else(|e| e.into_inner()))?;
        self.forget_cleaner_checkpoints(name);
        tracing::info!(topic = name, "deleted topic");
        Ok(())
    }

    /// Flushes logs whose `flush.ms` interval has passed (the flush scheduler's tick).
    pub fn flush_due(&self, now_ms: i64) {
        for partition in self.all_partitions() {
            if let Err(e) = partition.with_log(|log| log.flush_if_due(now_ms)) {
                tracing::error!(partition = %partition, "flush failed: {e}");
            }
        }
    }

    /// Deletes segments past their topic's retention (Kafka's retention check), and any whose
    /// `.deleted` files have waited `file.delete.delay.ms`. Returns the segments deleted.
    pub fn enforce_retention(&self, now_ms: i64) -> usize {
        let mut deleted = 0;
        for topic in self.topics() {
            let retention = topic.settings().retention;
            for partition in &topic.partitions {
                let result = partition.with_log(|log| {
                    let high_watermark = log.log_end_offset();
                    let count = log.delete_old_segments(&retention, high_watermark, now_ms)?;
                    log.remove_deleted_files(now_ms)?;
                    Ok(count)
                });
                match result {
                    Ok(count) => deleted += count,
                    Err(e) => tracing::error!(partition = %partition, "retention failed: {e}"),
                }
            }
        }
        if deleted > 0 {
            tracing::info!(segments = deleted, "deleted segments past retention");
            if let Err(e) = self.write_checkpoints() {
                tracing::error!("writing checkpoints after retention failed: {e}");
            }
        }
        deleted
    }

    /// Forgets idempotent producers idle for `producer.id.expiration.ms`.
    pub fn expire_producers(&self, now_ms: i64) {
        let expiration_ms = self.config.producer_id_expiration_ms;
        for partition in self.all_partitions() {
            let _ = partition.with_state(|state| {
                state.producers.expire(now_ms, expiration_ms);
                Ok(())
            });
        }
    }

    /// Writes the recovery-point, high-watermark and log-start-offset checkpoints (atomically,
    /// fsynced), with Kafka's entries: every log in the first two, and in the last only the logs
    /// whose log start offset lies above their first segment's base offset (for the others
    /// loading finds it from the segments).
    pub fn write_checkpoints(&self) -> std::io::Result<()> {
        let mut recovery = Vec::new();
        let mut high_watermarks = Vec::new();
        let mut starts = Vec::new();
        for partition in self.all_partitions() {
            let offsets = partition.with_log(|log| {
                Ok((
                    log.recovery_point(),
                    // One replica: the high watermark is the log end offset.
                    log.log_end_offset(),
                    log.log_start_offset(),
                    log.first_segment_base_offset(),
                ))
            });
            if let Ok((recovery_point, high_watermark, log_start, first_base)) = offsets {
                let (topic, index) = (partition.topic.clone(), partition.index);
                recovery.push((topic.clone(), index, recovery_point));
                high_watermarks.push((topic.clone(), index, high_watermark));
                if log_start > first_base {
                    starts.push((topic, index, log_start));
                }
            }
        }
        write_checkpoint(&self.log_dir.join(RECOVERY_POINT_CHECKPOINT), &recovery)?;
        write_checkpoint(
            &self.log_dir.join(REPLICATION_OFFSET_CHECKPOINT),
            &high_watermarks,
        )?;
        write_checkpoint(&self.log_dir.join(LOG_START_OFFSET_CHECKPOINT), &starts)
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
            if let Err(e) = partition.with_log(|log| log.close()) {
                tracing::error!(partition = %partition, "close failed: {e}");
                all_closed = false;
            }
        }
        self.write_checkpoints()?;
        if all_closed {
            layout::write_clean_shutdown_marker(&self.log_dir.join(CLEAN_SHUTDOWN_MARKER))?;
        }
        layout::remove_lock_file(&self.log_dir)?;
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
        // A deleted partition has nothing left to configure.
        let _ = partition.with_log(|log| {
            log.set_config(settings.log.clone());
            Ok(())
        });
    }
    topic.set_settings(settings);
}

fn checkpoint_map(
    entries: std::io::Result<Vec<(String, i32, i64)>>,
) -> HashMap<(String, i32), i64> {
    match entries {
        Ok(entries) => entries.into_iter().map(|(t, p, o)| ((t, p), o)).collect(),
        Err(e) => {
            // Kafka resets an unreadable checkpoint: recovery starts from offset 0.
            tracing::warn!("unreadable checkpoint, recovering from the start: {e}");
            HashMap::new()
        }
    }
}
