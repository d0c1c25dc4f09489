//! Produce (0): validate each partition's one batch, append it verbatim (base offset and leader
//! epoch stamped in place by the log), and answer with its base offset. acks=0 gets no response,
//! and an error under acks=0 closes the connection so the client notices, as Kafka does.
//! Authorization comes first (TRANSACTIONAL_ID WRITE for transactional batches, refusing the
//! whole request; topic WRITE per topic). Each partition's errors then come in Kafka's order:
//! unknown topic or partition, the batch's framing, acks, the topic's writability, then the
//! batch's contents.
//! After the appends the request is charged to the client's `producer_byte_rate` (its size) and,
//! unless acks=0, `request_percentage` (the handler's time); the larger throttle is answered.

use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::authorize::Authz;
use super::errors::{code, error_message, partition_error_code, Refused, NONE};
use super::produce_txn;
use super::{respond_throttled, Broker, Outcome};
use crate::record_batch::recompress;
use crate::record_batch::validate::{validate, validate_framing};
use crate::security::acl::Operation;
use crate::storage::consumer_offsets::CONSUMER_OFFSETS_TOPIC;
use crate::storage::transaction_state::TRANSACTION_STATE_TOPIC;
use crate::storage::{Partition, PartitionError, Topic, TxnVerification};

/// Who sent the request, for quotas.
pub struct Client<'a> {
    pub quota: crate::quota::QuotaClient<'a>,
    /// The request's header and body.
    pub request_bytes: usize,
}

pub async fn handle(
    broker: &Broker,
    authz: &Authz<'_>,
    mut request: ProduceRequest,
    correlation_id: i32,
    version: i16,
    client: Client<'_>,
) -> Outcome {
    // A produce never parks, so its wall time is its handler thread time.
    let started = Instant::now();
    let acks = request.acks;
    let now_ms = broker.clock.now_ms();
    // Authorization first, as in Kafka's handler, before any batch or transaction is looked at:
    // transactional batches need WRITE on the request's transactional id (the whole request
    // fails otherwise), and each topic WRITE (its partitions fail, and are never verified into
    // a transaction).
    let txn_denied = request
        .transactional_id
        .as_ref()
        .is_some_and(|id| !authz.transactional_id(Operation::Write, id));
    if txn_denied && produce_txn::has_transactional_records(&request) {
        let error = ResponseError::TransactionalIdAuthorizationFailed;
        return refuse_all(request, correlation_id, version, error);
    }
    let refused_topics = take_unauthorized(broker, authz, &mut request, version);
    let verifications = match produce_txn::transactional_producer(&request) {
        Err(error) => return refuse_all(request, correlation_id, version, error),
        Ok(Some(producer)) => produce_txn::verify(broker, &request, &producer, version).await,
        Ok(None) => produce_txn::Verifications::new(),
    };
    // A transactional batch with no producer id to verify cannot open a transaction.
    let unverified = if version <= 11 && !broker.config.transaction_partition_verification_enable {
        TxnVerification::Off
    } else {
        TxnVerification::Guard(None)
    };
    let mut any_error = false;
    let mut responses = Vec::with_capacity(request.topic_data.len());
    for topic_data in request.topic_data {
        let topic = if version >= 13 {
            broker.logs.topic_by_id(topic_data.topic_id)
        } else {
            broker.logs.topic(topic_data.name.as_str())
        };
        let unknown = if version >= 13 {
            ResponseError::UnknownTopicId
        } else {
            ResponseError::UnknownTopicOrPartition
        };
        let mut partitions = Vec::with_capacity(topic_data.partition_data.len());
        let key_name = if version >= 13 {
            topic_data.topic_id.to_string()
        } else {
            topic_data.name.to_string()
        };
        for data in topic_data.partition_data {
            let mut response = PartitionProduceResponse::default()
                .with_index(data.index)
                .with_base_offset(-1);
            let verified = verifications.get(&(key_name.clone(), data.index));
            let partition = topic
                .as_ref()
                .and_then(|t| t.partition(data.index).map(|p| (t, p)));
            match (partition, verified) {
                (None, _) => response.error_code = code(unknown),
                // KIP-890's verification comes before the batch is looked at, as in Kafka.
                (Some(_), Some(Err(refused))) => {
                    response.error_code = refused.error_code;
                    if version >= 8 {
                        response.error_message =
                            error_message(refused.error_code, refused.message.clone());
                    }
                }
                (Some((topic, partition)), verified) => {
                    let verification = match verified {
                        Some(Ok(verification)) => *verification,
                        _ => unverified,
                    };
                    match admit(acks, topic, &data.records, version) {
                        Err(refused) => {
                            response.error_code = refused.error_code;
                            if version >= 8 {
                                response.error_message =
                                    Some(StrBytes::from_string(refused.message));
                            }
                        }
                        Ok(()) => {
                            let appended = append_one(
                                (topic, partition),
                                data.records,
                                (version, verification),
                                now_ms,
                                &mut response,
                            );
                            if let Some((messages, bytes)) = appended {
                                broker
                                    .metrics
                                    .record_produce(&topic.name, messages, bytes, false);
                            }
                        }
                    }
                }
            }
            if response.error_code != NONE {
                let name = topic
                    .as_ref()
                    .map_or(topic_data.name.as_str(), |t| t.name.as_str());
                broker.metrics.record_produce(name, 0, 0, true);
            }
            any_error |= response.error_code != NONE;
            partitions.push(response);
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic_data.name)
                .with_topic_id(topic_data.topic_id)
                .with_partition_responses(partitions),
        );
    }
    for (name, refused) in refused_topics {
        for _ in &refused.partition_responses {
            broker.metrics.record_produce(&name, 0, 0, true);
        }
        any_error = true;
        responses.push(refused);
    }
    let quotas = &broker.quotas;
    let charged_at_ms = broker.clock.now_ms();
    let bandwidth_throttle_ms =
        quotas.record_produce(client.quota, client.request_bytes, charged_at_ms);
    if acks == 0 {
        // acks=0 is exempt from the request quota, not from the byte rate.
        return match (any_error, bandwidth_throttle_ms) {
            (true, _) => Outcome::Close("acks=0 produce failed".into()),
            (false, 0) => Outcome::NoResponse,
            (false, throttle_ms) => Outcome::Throttle {
                response: None,
                throttle_ms,
            },
        };
    }
    let request_throttle_ms =
        quotas.record_request_time(client.quota, started.elapsed(), charged_at_ms);
    let throttle_ms = bandwidth_throttle_ms.max(request_throttle_ms);
    let response = ProduceResponse::default()
        .with_responses(responses)
        .with_throttle_time_ms(throttle_ms);
    respond_throttled(correlation_id, version, &response, throttle_ms)
}

/// Kafka's checks on a known partition before its log is involved, in Kafka's order: the
/// batch framing (`ProduceRequest.validateRecords`), then acks, then whether the topic may be
/// written with them. The batch's contents are checked by `validate` in `append_one`.
fn admit(acks: i16, topic: &Topic, records: &Option<Bytes>, version: i16) -> Result<(), Refused> {
    validate_framing(records.as_deref().unwrap_or_default(), version)?;
    let refuse = |error: ResponseError, message: &str| Refused {
        error_code: code(error),
        message: message.to_string(),
    };
    if !(-1..=1).contains(&acks) {
        return Err(refuse(
            ResponseError::InvalidRequiredAcks,
            "acks must be -1, 0 or 1",
        ));
    }
    // Only the coordinators write their internal topics, as in Kafka.
    if topic.name == CONSUMER_OFFSETS_TOPIC || topic.name == TRANSACTION_STATE_TOPIC {
        return Err(refuse(
            ResponseError::InvalidTopicException,
            "clients may not write an internal topic",
        ));
    }
    // The ISR of a single broker is itself: acks=all cannot meet a larger minimum.
    if acks == -1 && topic.settings().min_insync_replicas > 1 {
        return Err(refuse(
            ResponseError::NotEnoughReplicas,
            "min.insync.replicas is larger than the single broker's ISR",
        ));
    }
    Ok(())
}

/// Takes out the topics the caller may not write, answered TOPIC_AUTHORIZATION_FAILED on every
/// partition, with their names. Authorization comes before existence: a name the caller may not
/// write is refused whether or not it exists; from v13 an id is authorized on the name of the
/// topic it names (an id that names none stays, to be answered UNKNOWN_TOPIC_ID).
fn take_unauthorized(
    broker: &Broker,
    authz: &Authz<'_>,
    request: &mut ProduceRequest,
    version: i16,
) -> Vec<(String, TopicProduceResponse)> {
    let mut refused = Vec::new();
    request.topic_data.retain(|t| {
        let name = if version >= 13 {
            match broker.logs.topic_by_id(t.topic_id) {
                Some(topic) => topic.name.clone(),
                None => return true,
            }
        } else {
            t.name.to_string()
        };
        if authz.topic(Operation::Write, &name) {
            return true;
        }
        let partitions = t
            .partition_data
            .iter()
            .map(|data| {
                PartitionProduceResponse::default()
                    .with_index(data.index)
                    .with_base_offset(-1)
                    .with_error_code(code(ResponseError::TopicAuthorizationFailed))
            })
            .collect();
        let response = TopicProduceResponse::default()
            .with_name(t.name.clone())
            .with_topic_id(t.topic_id)
            .with_partition_responses(partitions);
        refused.push((name, response));
        false
    });
    refused
}

/// The answer to a request refused as a whole: every partition gets `error` (an acks=0
/// request's connection is closed, as for any failed acks=0 produce).
fn refuse_all(
    request: ProduceRequest,
    correlation_id: i32,
    version: i16,
    error: ResponseError,
) -> Outcome {
    if request.acks == 0 {
        return Outcome::Close(format!("acks=0 produce refused: {error}"));
    }
    let responses = request
        .topic_data
        .into_iter()
        .map(|topic_data| {
            let partitions = topic_data
                .partition_data
                .iter()
                .map(|data| {
                    PartitionProduceResponse::default()
                        .with_index(data.index)
                        .with_base_offset(-1)
                        .with_error_code(code(error))
                })
                .collect();
            TopicProduceResponse::default()
                .with_name(topic_data.name)
                .with_topic_id(topic_data.topic_id)
                .with_partition_responses(partitions)
        })
        .collect();
    let response = ProduceResponse::default().with_responses(responses);
    respond_throttled(correlation_id, version, &response, 0)
}

/// Validates one partition's batch against its topic's settings, re-encodes it into the
/// topic's codec when that names another, and appends it through storage. Returns the
/// records and bytes appended (for `BrokerTopicMetrics`), None when refused.
fn append_one(
    (topic, partition): (&Topic, &Partition),
    records: Option<Bytes>,
    (version, verification): (i16, TxnVerification),
    now_ms: i64,
    response: &mut PartitionProduceResponse,
) -> Option<(u64, u64)> {
    let records = records.unwrap_or_default();
    let settings = topic.settings();
    let header = match validate(&records, &settings.batch_limits(version, now_ms)) {
        Ok(header) => header,
        Err(refused) => {
            let refused = Refused::from(refused);
            tracing::debug!(partition = %partition, "refused batch: {}", refused.message);
            response.error_code = refused.error_code;
            if version >= 8 {
                response.error_message = Some(StrBytes::from_string(refused.message));
            }
            return None;
        }
    };
    // Bytes after the batch that are not a whole batch are not stored (Kafka trims them).
    let records = records.slice(..header.total_size());
    // The topic's compression.type, when it names another codec (recompress.rs).
    let records = match recompress::to_topic_codec(records, &header, &settings.recompression()) {
        Ok(records) => records,
        Err(refused) => {
            response.error_code = Refused::from(refused).error_code;
            return None;
        }
    };
    let verification = if header.is_transactional() {
        verification
    } else {
        TxnVerification::Off
    };
    match partition.append_produced(
        &records,
        &header,
        settings.log_append_time,
        now_ms,
        verification,
    ) {
        Ok(produced) => {
            response.base_offset = produced.base_offset;
            response.log_start_offset = produced.log_start_offset;
            response.log_append_time_ms = produced.log_append_time_ms;
            let messages = u64::try_from(header.records_count).unwrap_or(0);
            Some((messages, records.len() as u64))
        }
        Err(e) => {
            if let PartitionError::Storage(_) | PartitionError::Corrupt(_) = e {
                tracing::warn!(partition = %partition, "append failed: {e}");
            }
            response.error_code = partition_error_code(&e);
            None
        }
    }
}
