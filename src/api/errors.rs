//! The one place that chooses Kafka error codes for sluice's internal errors.

use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::record_batch::BatchError;
use crate::storage::{PartitionError, SequenceError, TopicError};

pub const NONE: i16 = 0;

pub fn code(e: ResponseError) -> i16 {
    e.code()
}

/// A refused partition: its error code and the message Kafka would give.
#[derive(Debug, PartialEq)]
pub struct Refused {
    pub error_code: i16,
    pub message: String,
}

/// A batch refused by `record_batch`'s checks, with its message unchanged.
impl From<BatchError> for Refused {
    fn from(e: BatchError) -> Self {
        Refused {
            error_code: batch_error_code(&e),
            message: e.into_message(),
        }
    }
}

/// The code Kafka answers each kind of refused batch with.
pub fn batch_error_code(e: &BatchError) -> i16 {
    match e {
        BatchError::Corrupt(_) => code(ResponseError::CorruptMessage),
        BatchError::InvalidRecord(_) => code(ResponseError::InvalidRecord),
        BatchError::MessageTooLarge(_) => code(ResponseError::MessageTooLarge),
        BatchError::UnsupportedCompression(_) => code(ResponseError::UnsupportedCompressionType),
        BatchError::InvalidTimestamp(_) => code(ResponseError::InvalidTimestamp),
        BatchError::RecompressFailed(_) => code(ResponseError::UnknownServerError),
    }
}

pub fn partition_error_code(e: &PartitionError) -> i16 {
    code(match e {
        PartitionError::Deleted => ResponseError::UnknownTopicOrPartition,
        PartitionError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        PartitionError::RecordTooLarge => ResponseError::RecordListTooLarge,
        PartitionError::Corrupt(_) => ResponseError::CorruptMessage,
        PartitionError::Storage(_) => ResponseError::KafkaStorageError,
        PartitionError::Sequence(SequenceError::InvalidProducerEpoch) => {
            ResponseError::InvalidProducerEpoch
        }
        PartitionError::Sequence(SequenceError::OutOfOrderSequence) => {
            ResponseError::OutOfOrderSequenceNumber
        }
        PartitionError::Sequence(SequenceError::InvalidTxnState) => ResponseError::InvalidTxnState,
        PartitionError::Sequence(SequenceError::CoordinatorFenced) => {
            ResponseError::TransactionCoordinatorFenced
        }
    })
}

pub fn topic_error_code(e: &TopicError) -> i16 {
    match e {
        TopicError::AlreadyExists => code(ResponseError::TopicAlreadyExists),
        TopicError::UnknownTopic => code(ResponseError::UnknownTopicOrPartition),
        TopicError::InvalidName(_) => code(ResponseError::InvalidTopicException),
        TopicError::InvalidConfig(_) => code(ResponseError::InvalidConfig),
        TopicError::InvalidPartitions(_) => code(ResponseError::InvalidPartitions),
        TopicError::Storage(_) => code(ResponseError::KafkaStorageError),
    }
}

/// A topic refused by a strict `controller_mutation_rate`. The message is the error's own, so
/// `error_message` leaves it out.
pub fn throttling_quota_exceeded(_: crate::quota::ThrottlingQuotaExceeded) -> (i16, String) {
    let error = ResponseError::ThrottlingQuotaExceeded;
    (code(error), error.to_string())
}

/// The message to send with error `error_code`: none when it only repeats the error's own
/// description, as Kafka's `ApiError.fromThrowable` leaves it out.
pub fn error_message(error_code: i16, message: String) -> Option<StrBytes> {
    let generic = ResponseError::try_from_code(error_code).map(|e| e.to_string());
    (generic.as_deref() != Some(message.as_str())).then(|| StrBytes::from_string(message))
}

pub fn quota_error_code(e: &crate::quota::QuotaError) -> i16 {
    use crate::quota::QuotaError;
    match e {
        QuotaError::InvalidRequest(_) => code(ResponseError::InvalidRequest),
        // Kafka's answer to an entity type it does not know in a describe filter.
        QuotaError::UnsupportedEntityType(_) => code(ResponseError::UnsupportedVersion),
        QuotaError::Storage(_) => code(ResponseError::UnknownServerError),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_batches_get_kafkas_codes_and_keep_their_message() {
        let cases = [
            (BatchError::Corrupt("c".into()), 2),
            (BatchError::InvalidRecord("i".into()), 87),
            (BatchError::MessageTooLarge("m".into()), 10),
            (BatchError::UnsupportedCompression("u".into()), 76),
            (BatchError::InvalidTimestamp("t".into()), 32),
            (BatchError::RecompressFailed("r".into()), -1),
        ];
        for (error, expected) in cases {
            let message = error.message().to_string();
            let refused = Refused::from(error);
            assert_eq!(refused.error_code, expected, "{message}");
            assert_eq!(refused.message, message);
        }
        assert_eq!(
            batch_error_code(&BatchError::InvalidRecord(String::new())),
            ResponseError::InvalidRecord.code()
        );
    }
}
