//! What the coordinator knows about topics: a view of the broker's topic registry, which lives
//! above the coordinator (`storage`) and is handed to it at start-up. KIP-848 groups subscribe by
//! name or regular expression but are assigned by topic id, and their group epoch moves when a
//! subscribed topic's partition count changes, so the coordinator asks this view for ids,
//! partition counts and, to resolve regular expressions, every topic name.

use uuid::Uuid;

/// One topic as the coordinator sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicMetadata {
    pub id: Uuid,
    pub name: String,
    pub partitions: i32,
}

/// The broker's topics. Implementations must not call back into the coordinator: it asks
/// while holding its lock.
pub trait TopicImage: Send + Sync {
    fn by_name(&self, name: &str) -> Option<TopicMetadata>;
    fn by_id(&self, id: Uuid) -> Option<TopicMetadata>;
    /// Every topic name, internal topics included (a regular expression may match them).
    fn names(&self) -> Vec<String>;
    /// A number that grows whenever a topic is created, so that regular expressions are
    /// resolved again when new topics may match (Kafka's metadata image version).
    fn version(&self) -> i64;
}

/// No topics at all: the view of a coordinator that was never given one (unit tests).
pub struct NoTopics;

impl TopicImage for NoTopics {
    fn by_name(&self, _name: &str) -> Option<TopicMetadata> {
        None
    }
    fn by_id(&self, _id: Uuid) -> Option<TopicMetadata> {
        None
    }
    fn names(&self) -> Vec<String> {
        Vec::new()
    }
    fn version(&self) -> i64 {
        0
    }
}

/// A stable 64-bit hash of the subscribed topics' metadata (id, name, partition count), in name
/// order; 0 for none. Kafka stores such a hash in the group-epoch record (KIP-1101) to notice
/// that a subscribed topic changed; sluice's is FNV-1a over the same facts (Kafka's is XXH3),
/// only ever compared with hashes this broker computed.
pub(crate) fn metadata_hash<'a>(
    topics: &dyn TopicImage,
    names: impl IntoIterator<Item = &'a String>,
) -> i64 {
    let mut found: Vec<TopicMetadata> = names
        .into_iter()
        .filter_map(|n| topics.by_name(n))
        .collect();
    if found.is_empty() {
        return 0;
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut put = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for topic in &found {
        put(topic.id.as_bytes());
        put(&(topic.name.len() as u32).to_be_bytes());
        put(topic.name.as_bytes());
        put(&topic.partitions.to_be_bytes());
    }
    hash as i64
}
