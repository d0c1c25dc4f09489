//! The topic registry as the group coordinator sees it (`group::topics::TopicImage`): ids,
//! partition counts and names, and a version that moves when a topic is created, so that
//! KIP-848 regular expressions are resolved again. Reads only: it never calls the coordinator.

use std::sync::atomic::Ordering;

use uuid::Uuid;

use super::LogManager;
use crate::group::topics::{TopicImage, TopicMetadata};

impl TopicImage for LogManager {
    fn by_name(&self, name: &str) -> Option<TopicMetadata> {
        self.topic(name).map(|t| TopicMetadata {
            id: t.id,
            name: t.name.clone(),
            partitions: t.partitions.len() as i32,
        })
    }

    fn by_id(&self, id: Uuid) -> Option<TopicMetadata> {
        self.topic_by_id(id).map(|t| TopicMetadata {
            id: t.id,
            name: t.name.clone(),
            partitions: t.partitions.len() as i32,
        })
    }

    fn names(&self) -> Vec<String> {
        self.topics().iter().map(|t| t.name.clone()).collect()
    }

    fn version(&self) -> i64 {
        self.topics_created.load(Ordering::SeqCst)
    }
}
