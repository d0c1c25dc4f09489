//! Fetch (1): sessionless reads of byte ranges of segments, with long polling.
//!
//! A read_committed fetch reads up to each partition's last stable offset and lists the
//! aborted transactions its records overlap, so the client can drop their records; a
//! read_uncommitted one reads up to the high watermark and lists none (null).
//!
//! Every full fetch is answered with session id 0, which Kafka allows and which makes clients
//! keep sending full fetches; an incremental fetch therefore gets FETCH_SESSION_ID_NOT_FOUND. A
//! response lists exactly the requested partitions. Until the first partition that returns data,
//! the first whole batch is returned even past the byte limits (KIP-74). When fewer than
//! `min_bytes` are ready the request parks until an append to one of its partitions wakes it,
//! `max_wait_ms` passes, or the broker shuts down.
//!
//! Record bytes are never copied: each partition's read is a `SegmentSlice` (a file range fixed
//! under the partition's lock), and the response is framed around those ranges, which the
//! connection sends straight from the page cache (`protocol::encode_fetch_response`).
//!
//! Quotas (Kafka's order): `max_bytes` is first capped so that one response cannot force a
//! throttle on its own; the finished response is then charged to the client's
//! `request_percentage` (time spent reading, not parked) and `consumer_byte_rate` (its size).
//! When either is violated, the data is dropped and its bytes taken back: the client gets an
//! empty response with the throttle time (KIP-219), and its connection is muted.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::FetchTopic;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::ProducerId;
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use kafka_protocol::ResponseError;

use super::authorize::Authz;
use crate::security::acl::Operation;
use tokio::sync::futures::OwnedNotified;

use super::errors::{code, partition_error_code, NONE};
use super::{respond, respond_throttled, Broker, Outcome};
use crate::protocol::{encode_fetch_response, Chunk};
use crate::storage::{Isolation, SegmentSlice};

/// Answers a fetch from `client_id`, throttled when it violates a quota.
pub async fn handle(
    broker: &Broker,
    authz: &Authz<'_>,
    request: FetchRequest,
    correlation_id: i32,
    version: i16,
    client_id: crate::quota::QuotaClient<'_>,
) -> Outcome {
    let started = Instant::now();
    let mut parked = Duration::ZERO;
    if version >= 7 && request.session_id != 0 && request.session_epoch > 0 {
        let response =
            FetchResponse::default().with_error_code(code(ResponseError::FetchSessionIdNotFound));
        return respond(correlation_id, version, &response);
    }
    let quota_max_bytes = broker.quotas.fetch_max_bytes(client_id);
    let max_bytes = request
        .max_bytes
        .min(broker.config.fetch_max_bytes)
        .min(quota_max_bytes);
    let max_bytes = usize::try_from(max_bytes).unwrap_or(0);
    let min_bytes = usize::try_from(request.min_bytes.max(0))
        .unwrap_or(0)
        .min(max_bytes);
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64);
    let mut shutdown = broker.shutdown.clone();
    let may_park = request.max_wait_ms > 0;
    let isolation = Isolation::from_wire(request.isolation_level);
    loop {
        let mut read = read_all(
            broker,
            authz,
            &request.topics,
            version,
            max_bytes,
            may_park,
            isolation,
        );
        let done = read.bytes >= min_bytes
            || read.any_error
            || request.max_wait_ms <= 0
            || *shutdown.borrow();
        if done || tokio::time::Instant::now() >= deadline {
            for (topic, bytes, failed) in &read.per_topic {
                broker.metrics.record_fetch(topic, *bytes, *failed);
            }
            let busy = started.elapsed().saturating_sub(parked);
            return charge(broker, read, correlation_id, version, client_id, busy);
        }
        let parked_at = Instant::now();
        let _in_purgatory = broker.metrics.fetch_parked();
        tokio::select! {
            _ = any_appended(&mut read.appended) => {}
            _ = tokio::time::sleep_until(deadline) => {}
            _ = shutdown.changed() => {}
        }
        parked += parked_at.elapsed();
    }
}

/// Frames a finished response and charges it to the client's quotas; a throttled client gets
/// an empty response instead, and the bytes it would have been charged are taken back.
fn charge(
    broker: &Broker,
    read: Read,
    correlation_id: i32,
    version: i16,
    client_id: crate::quota::QuotaClient<'_>,
    busy: Duration,
) -> Outcome {
    let response = FetchResponse::default().with_responses(read.responses);
    let frame = match encode_fetch_response(correlation_id, version, response, read.records) {
        Ok(frame) => frame,
        Err(e) => {
            // A response we cannot frame is a sluice bug; closing tells the client to retry.
            tracing::error!(correlation_id, version, "cannot encode fetch response: {e}");
            return Outcome::Close(format!("fetch response encoding failed: {e}"));
        }
    };
    let quotas = &broker.quotas;
    let now_ms = broker.clock.now_ms();
    // Kafka counts the size prefix and the body.
    let response_bytes = frame.len();
    let request_throttle_ms = quotas.record_request_time(client_id, busy, now_ms);
    let bandwidth_throttle_ms = quotas.record_fetch(client_id, response_bytes, now_ms);
    let throttle_ms = request_throttle_ms.max(bandwidth_throttle_ms);
    if throttle_ms == 0 {
        return Outcome::RespondFrame(frame);
    }
    quotas.unrecord_fetch(client_id, response_bytes, now_ms);
    let empty = FetchResponse::default().with_throttle_time_ms(throttle_ms);
    respond_throttled(correlation_id, version, &empty, throttle_ms)
}

/// Every requested partition's answer, in request order.
struct Read {
    /// The responses, with each partition's `records` left empty.
    responses: Vec<FetchableTopicResponse>,
    /// Each partition's records, in the order of `responses`.
    records: Vec<Chunk>,
    /// Record bytes in all.
    bytes: usize,
    any_error: bool,
    /// One wake-up per partition read, registered before its read (when the fetch may park).
    appended: Vec<Pin<Box<OwnedNotified>>>,
    /// Each known partition's topic, record bytes and whether it failed, for the metrics.
    per_topic: Vec<(String, u64, bool)>,
}

/// Resolves when any of the partitions was appended to since its wake-up was registered.
fn any_appended(appended: &mut [Pin<Box<OwnedNotified>>]) -> impl Future<Output = ()> + '_ {
    std::future::poll_fn(move |cx| {
        for wakeup in appended.iter_mut() {
            if wakeup.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
        }
        Poll::Pending
    })
}

/// Reads every requested partition in order; with `may_park`, registers a wake-up on each
/// partition before reading it.
fn read_all(
    broker: &Broker,
    authz: &Authz<'_>,
    topics: &[FetchTopic],
    version: i16,
    max_bytes: usize,
    may_park: bool,
    isolation: Isolation,
) -> Read {
    let mut remaining = max_bytes;
    let mut total = 0usize;
    let mut any_error = false;
    let mut responses = Vec::with_capacity(topics.len());
    let mut records = Vec::new();
    let mut appended = Vec::new();
    let mut per_topic = Vec::new();
    for fetch_topic in topics {
        let topic = if version >= 13 {
            broker.logs.topic_by_id(fetch_topic.topic_id)
        } else {
            broker.logs.topic(fetch_topic.topic.as_str())
        };
        let unknown = if version >= 13 {
            ResponseError::UnknownTopicId
        } else {
            ResponseError::UnknownTopicOrPartition
        };
        // READ on the topic, checked before existence (by id once the id names a topic).
        let name = topic
            .as_ref()
            .map_or(fetch_topic.topic.as_str(), |t| t.name.as_str());
        let denied = (version < 13 || topic.is_some()) && !authz.topic(Operation::Read, name);
        let mut partitions = Vec::with_capacity(fetch_topic.partitions.len());
        for fetch in &fetch_topic.partitions {
            let mut data = PartitionData::default()
                .with_partition_index(fetch.partition)
                .with_high_watermark(-1)
                .with_last_stable_offset(-1)
                .with_log_start_offset(-1)
                .with_records(Some(Bytes::new()));
            let mut slice: Option<SegmentSlice> = None;
            let partition = topic.as_ref().and_then(|t| t.partition(fetch.partition));
            match partition {
                // Answered, but not a reason to skip the wait for the others, as in Kafka.
                _ if denied => {
                    data.error_code = code(ResponseError::TopicAuthorizationFailed);
                    partitions.push(data);
                    records.push(Chunk::Bytes(Bytes::new()));
                    continue;
                }
                None => data.error_code = code(unknown),
                // A client ahead of this broker's epoch; none can be behind epoch 0.
                Some(partition) if fetch.current_leader_epoch > partition.leader_epoch() => {
                    data.error_code = code(ResponseError::UnknownLeaderEpoch)
                }
                Some(partition) => {
                    if may_park {
                        // Registered before reading, so an append between the read and the
                        // wait is not missed.
                        let mut wakeup = Box::pin(partition.appended().clone().notified_owned());
                        wakeup.as_mut().enable();
                        appended.push(wakeup);
                    }
                    let min_one_batch = total == 0;
                    let limit = usize::try_from(fetch.partition_max_bytes.max(0))
                        .unwrap_or(0)
                        .min(remaining);
                    match partition.read(fetch.fetch_offset, limit, min_one_batch, isolation) {
                        Ok(read) => {
                            data.high_watermark = read.offsets.high_watermark;
                            data.last_stable_offset = read.offsets.last_stable_offset;
                            data.log_start_offset = read.offsets.log_start_offset;
                            data.aborted_transactions = read.aborted.map(|aborted| {
                                aborted
                                    .iter()
                                    .map(|txn| {
                                        AbortedTransaction::default()
                                            .with_producer_id(ProducerId(txn.producer_id))
                                            .with_first_offset(txn.first_offset)
                                    })
                                    .collect()
                            });
                            match read.records {
                                Ok(read) => {
                                    let len = read.as_ref().map_or(0, SegmentSlice::len);
                                    remaining = remaining.saturating_sub(len);
                                    total += len;
                                    slice = read;
                                }
                                Err(e) => data.error_code = partition_error_code(&e),
                            }
                        }
                        Err(e) => data.error_code = partition_error_code(&e),
                    }
                }
            }
            any_error |= data.error_code != NONE;
            if let Some(topic) = &topic {
                let bytes = slice.as_ref().map_or(0, |s| s.len() as u64);
                per_topic.push((topic.name.clone(), bytes, data.error_code != NONE));
            }
            partitions.push(data);
            records.push(match slice {
                Some(slice) => Chunk::File {
                    file: slice.file().clone(),
                    position: slice.position(),
                    len: slice.len(),
                },
                None => Chunk::Bytes(Bytes::new()),
            });
        }
        responses.push(
            FetchableTopicResponse::default()
                .with_topic(fetch_topic.topic.clone())
                .with_topic_id(fetch_topic.topic_id)
                .with_partitions(partitions),
        );
    }
    Read {
        responses,
        records,
        bytes: total,
        any_error,
        appended,
        per_topic,
    }
}
