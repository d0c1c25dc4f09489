//! One file per Kafka API: each turns a decoded request into a response using the broker's
//! shared state. This module dispatches by API key and frames the response. Handlers own no
//! persistent state; everything durable lives in `storage`/`log`.

mod acls;
mod add_partitions_to_txn;
mod alter_client_quotas;
mod alter_configs;
mod api_versions;
pub mod authorize;
mod committed_offsets;
mod create_partitions;
mod create_topics;
mod delete_records;
mod delete_topics;
mod describe_client_quotas;
mod describe_cluster;
mod describe_configs;
mod describe_log_dirs;
mod describe_topic_partitions;
mod describe_user_scram_credentials;
mod elect_leaders;
mod end_txn;
mod errors;
mod fault_responses;
pub mod faults;
mod fetch;
mod find_coordinator;
mod group_configs;
mod init_producer_id;
mod list_config_resources;
mod list_offsets;
mod metadata;
mod produce;
mod produce_txn;
pub mod sasl;
mod session;
mod throttle;
mod transactions_admin;
mod txn_offset_commit;
mod write_txn_markers;

pub use session::Session;

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use kafka_protocol::protocol::{Encodable, HeaderVersion};
use tokio::sync::{watch, Semaphore};

use crate::config::Config;
use crate::group::GroupCoordinator;
use crate::metrics::BrokerMetrics;
use crate::protocol::{DecodedRequest, ResponseFrame, VersionTable};
use crate::quota::QuotaManager;
use crate::security::acl::Operation;
use crate::security::Security;
use crate::storage::{LogManager, MarkerWriter};
use crate::time::Clock;
use crate::txn::TransactionCoordinator;

/// What the handlers share: settings, the logs, the clock, and the shutdown signal. One for
/// every listener: what depends on the listener a request came in on (its advertised endpoint,
/// its security) is found through the request's `Session`.
pub struct Broker {
    pub config: Arc<Config>,
    pub logs: Arc<LogManager>,
    pub groups: Arc<GroupCoordinator>,
    /// Writes transaction markers to partitions (WriteTxnMarkers).
    pub markers: Arc<MarkerWriter>,
    /// The transaction coordinator.
    pub txn: Arc<TransactionCoordinator>,
    pub clock: Arc<dyn Clock>,
    pub shutdown: watch::Receiver<bool>,
    /// Client quotas: every request is charged here and may come back with a throttle time.
    pub quotas: Arc<QuotaManager>,
    /// Byte permits for requests read but not yet answered (`queued.max.request.bytes`), shared
    /// by every connection; None when unbounded.
    pub request_memory: Option<Arc<Semaphore>>,
    /// Listeners' TLS and SASL settings, the SCRAM credentials and the authorizer.
    pub security: Arc<Security>,
    /// What `/metrics` shows (`metrics`); every request is counted and timed in `handle`.
    pub metrics: Arc<BrokerMetrics>,
    /// Fault injection for tests (`faults`), consulted once per request in `handle`.
    pub faults: Arc<faults::Faults>,
    /// The API versions advertised and served: sluice's table, or that table narrowed to the
    /// release of `sluice.emulate.kafka.version` (built at start-up).
    pub versions: Arc<VersionTable>,
}

/// What the connection does after a request.
#[derive(Debug)]
pub enum Outcome {
    /// Write this framed response.
    Respond(Bytes),
    /// Write this response, whose record bytes are sent straight from segment files.
    RespondFrame(ResponseFrame),
    /// Nothing to write (a successful acks=0 produce).
    NoResponse,
    /// Close the connection, as Kafka does (e.g. a failed acks=0 produce).
    Close(String),
    /// Write this response, wait `delay`, then close (a failed authentication).
    RespondAndClose {
        response: Bytes,
        delay: std::time::Duration,
        reason: String,
    },
    /// A quota was violated: write the response, if any (an acks=0 produce has none), then mute
    /// the connection for `throttle_ms`: neither read nor process its requests (KIP-219).
    Throttle {
        response: Option<Bytes>,
        throttle_ms: i32,
    },
}

/// What a handler answers, before the request quota has its say.
pub(crate) enum Reply {
    /// A response body. `throttle_ms` is what the handler's own quota asks for
    /// (`controller_mutation_rate`); the larger of it and the request quota's is answered.
    Body {
        body: Box<ResponseKind>,
        throttle_ms: i32,
    },
    /// An outcome the handler finished itself: Produce and Fetch charge every quota they are
    /// subject to and set the throttle time themselves.
    Finished(Outcome),
}

pub(crate) fn body(response: impl Into<ResponseKind>) -> Reply {
    throttled_body(response, 0)
}

/// A response body and the throttle time its handler's own quota asks for.
fn throttled_body(response: impl Into<ResponseKind>, throttle_ms: i32) -> Reply {
    Reply::Body {
        body: Box::new(response.into()),
        throttle_ms,
    }
}

/// Handles one request of `request_bytes` (header and body) on the connection of `session`;
/// responses of different requests are ordered by the caller. On a SASL listener the SASL
/// state machine (`sasl::gate`) sees the request first. Here, and only here, each request is
/// counted and timed (`metrics`) and, once past the SASL exchange, meets the armed faults
/// (`faults`).
///
/// Every request's handler thread time is charged to the client's `request_percentage`.
/// Produce and Fetch charge it themselves, with their byte rates. Every other response gets
/// the throttle time in its `throttle_time_ms` (when its version has the field) and is sent at
/// once; then the connection is muted for that long (KIP-219).
pub async fn handle(
    broker: &Broker,
    session: &mut Session,
    mut request: DecodedRequest,
    request_bytes: usize,
) -> Outcome {
    let started = std::time::Instant::now();
    let api_key = request.api_key as i16;
    let version = request.header.request_api_version;
    let client_id = request
        .header
        .client_id
        .as_ref()
        .map(|c| c.to_string())
        .unwrap_or_default();
    if let Some(outcome) = sasl::gate(broker, session, &mut request) {
        // The SASL exchange (and what it refuses) is counted, but no fault applies to it.
        let served = faults::ServedRequest {
            api_key,
            version,
            client_id,
            error_code: None,
        };
        record_served(broker, &outcome, started, served);
        return outcome;
    }
    let session = &*session;
    let fault = broker.faults.take(api_key, &client_id, || {
        let name_of = |id| broker.logs.topic_by_id(id).map(|t| t.name.clone());
        fault_responses::partitions(&request.body, &name_of)
    });
    let (outcome, error_code) = match fault {
        Some(faults::FaultAction::Error(code)) => (
            injected_error(broker, request, session, code).await,
            Some(code),
        ),
        Some(faults::FaultAction::Close) => (
            Outcome::Close("fault injection: connection closed".into()),
            Some(-2),
        ),
        Some(faults::FaultAction::Delay(delay)) => {
            tokio::time::sleep(delay).await;
            handle_request(broker, request, session, &client_id, request_bytes, 0).await
        }
        Some(faults::FaultAction::Throttle(throttle)) => {
            let throttle_ms = i32::try_from(throttle.as_millis()).unwrap_or(i32::MAX);
            let (outcome, error) = handle_request(
                broker,
                request,
                session,
                &client_id,
                request_bytes,
                throttle_ms,
            )
            .await;
            (throttle_injected(outcome, throttle_ms), error)
        }
        None => handle_request(broker, request, session, &client_id, request_bytes, 0).await,
    };
    let served = faults::ServedRequest {
        api_key,
        version,
        client_id,
        error_code,
    };
    record_served(broker, &outcome, started, served);
    outcome
}

/// Counts and times a request for the metrics, and logs it among the recent requests.
fn record_served(
    broker: &Broker,
    outcome: &Outcome,
    started: std::time::Instant,
    served: faults::ServedRequest,
) {
    let throttle_ms = match outcome {
        Outcome::Throttle { throttle_ms, .. } => *throttle_ms,
        _ => 0,
    };
    let elapsed = started.elapsed();
    broker
        .metrics
        .record_request(served.api_key, served.version, elapsed, throttle_ms);
    broker.faults.record(served);
}

/// The answer to a request that fault injection fails with `code`: nothing is done, except
/// that a Metadata request is answered (its brokers are needed) with the error on every topic.
async fn injected_error(
    broker: &Broker,
    request: DecodedRequest,
    session: &Session,
    code: i16,
) -> Outcome {
    let correlation_id = request.header.correlation_id;
    let version = request.header.request_api_version;
    let api_key = request.api_key;
    let body = match &request.body {
        RequestKind::Metadata(_) => match dispatch(broker, request, session, "", 0).await {
            Reply::Body { mut body, .. } => {
                fault_responses::set_topic_errors(&mut body, code);
                Some(*body)
            }
            Reply::Finished(outcome) => return outcome,
        },
        other => fault_responses::error_response(other, version, code),
    };
    match body {
        Some(body) => match crate::protocol::encode_response_kind(correlation_id, version, &body) {
            Ok(frame) => Outcome::Respond(frame),
            Err(e) => encoding_failed(correlation_id, version, e),
        },
        None => Outcome::Close(format!(
            "fault injection: no error response for {api_key:?}"
        )),
    }
}

/// An outcome muted for `throttle_ms` more (the injected throttle of a client).
fn throttle_injected(outcome: Outcome, throttle_ms: i32) -> Outcome {
    match outcome {
        Outcome::Respond(response) => Outcome::Throttle {
            response: Some(response),
            throttle_ms,
        },
        Outcome::NoResponse => Outcome::Throttle {
            response: None,
            throttle_ms,
        },
        Outcome::Throttle {
            response,
            throttle_ms: own,
        } => Outcome::Throttle {
            response,
            throttle_ms: own.max(throttle_ms),
        },
        other => other,
    }
}

/// `handle` without metrics and faults; also returns the response's top-level error, when
/// the handler answered with a body that has one. A body answers at least `min_throttle_ms`
/// (an injected throttle).
async fn handle_request(
    broker: &Broker,
    request: DecodedRequest,
    session: &Session,
    client_id: &str,
    request_bytes: usize,
    min_throttle_ms: i32,
) -> (Outcome, Option<i16>) {
    let correlation_id = request.header.correlation_id;
    let version = request.header.request_api_version;
    let is_data_path = matches!(request.api_key, ApiKey::Produce | ApiKey::Fetch);
    let dispatched = dispatch(broker, request, session, client_id, request_bytes);
    // Produce and Fetch measure their own time, without the time they sit parked.
    let (reply, busy) = if is_data_path {
        (dispatched.await, std::time::Duration::ZERO)
    } else {
        crate::quota::busy_time(dispatched).await
    };
    match reply {
        Reply::Finished(outcome) => (outcome, None),
        Reply::Body {
            mut body,
            throttle_ms,
        } => {
            let error = fault_responses::top_error(&body);
            let request_throttle_ms = broker.quotas.record_request_time(
                session.quota_client(client_id),
                busy,
                broker.clock.now_ms(),
            );
            let throttle_ms = throttle_ms.max(request_throttle_ms).max(min_throttle_ms);
            throttle::set_throttle_time_ms(&mut body, throttle_ms);
            let outcome =
                match crate::protocol::encode_response_kind(correlation_id, version, &body) {
                    Ok(frame) => Outcome::Respond(frame),
                    Err(e) => encoding_failed(correlation_id, version, e),
                };
            let outcome = match outcome {
                Outcome::Respond(response) if throttle_ms > 0 => Outcome::Throttle {
                    response: Some(response),
                    throttle_ms,
                },
                other => other,
            };
            (outcome, error)
        }
    }
}

/// Applies Kafka's authorization checks around the handler (`authorize::before`/`after`).
async fn dispatch(
    broker: &Broker,
    mut request: DecodedRequest,
    session: &Session,
    client_id: &str,
    request_bytes: usize,
) -> Reply {
    let authz = authorize::Authz::new(broker, session);
    let version = request.header.request_api_version;
    if let RequestKind::OffsetCommit(r) = &mut request.body {
        committed_offsets::name_commit_topics(broker, r, version);
    }
    let denied = match authorize::before(&authz, &mut request.body, version) {
        Ok(denied) => denied,
        Err(refused) => return refused,
    };
    match dispatch_authorized(broker, request, session, &authz, client_id, request_bytes).await {
        Reply::Body {
            mut body,
            throttle_ms,
        } => {
            authorize::after(&authz, denied, &mut body);
            Reply::Body { body, throttle_ms }
        }
        finished => finished,
    }
}

async fn dispatch_authorized(
    broker: &Broker,
    request: DecodedRequest,
    session: &Session,
    authz: &authorize::Authz<'_>,
    client_id: &str,
    request_bytes: usize,
) -> Reply {
    let quota_client = session.quota_client(client_id);
    let correlation_id = request.header.correlation_id;
    let version = request.header.request_api_version;
    let groups = &broker.groups;
    match request.body {
        RequestKind::ApiVersions(r) => {
            let identity = api_versions::Identity {
                cluster_id: broker.logs.cluster_id(),
                node_id: broker.config.node_id,
            };
            body(api_versions::handle(
                &r,
                version,
                &request.newer,
                identity,
                &broker.versions,
            ))
        }
        RequestKind::Metadata(r) => body(metadata::handle(broker, session, authz, r, version)),
        RequestKind::Produce(r) => {
            let client = produce::Client {
                quota: quota_client,
                request_bytes,
            };
            let reply = produce::handle(broker, authz, r, correlation_id, version, client);
            Reply::Finished(reply.await)
        }
        RequestKind::Fetch(r) => {
            let reply = fetch::handle(broker, authz, r, correlation_id, version, quota_client);
            Reply::Finished(reply.await)
        }
        RequestKind::ListOffsets(r) => body(list_offsets::handle(broker, r, version)),
        RequestKind::InitProducerId(r) => body(init_producer_id::handle(broker, r, version)),
        RequestKind::CreateTopics(r) => {
            let quota = broker
                .quotas
                .controller_mutation(quota_client, version >= 6);
            create_topics::handle(broker, r, version, quota)
        }
        RequestKind::DeleteTopics(r) => {
            let quota = broker
                .quotas
                .controller_mutation(quota_client, version >= 5);
            delete_topics::handle(broker, r, version, quota)
        }
        RequestKind::DescribeConfigs(r) => body(describe_configs::handle(broker, r, version)),
        RequestKind::ListConfigResources(r) => {
            body(list_config_resources::handle(broker, r, version))
        }
        RequestKind::AlterConfigs(r) => body(alter_configs::handle_alter(broker, r)),
        RequestKind::IncrementalAlterConfigs(r) => {
            body(alter_configs::handle_incremental(broker, r))
        }
        RequestKind::CreatePartitions(r) => {
            let quota = broker
                .quotas
                .controller_mutation(quota_client, version >= 3);
            create_partitions::handle(broker, r, quota)
        }
        RequestKind::DescribeCluster(r) => {
            body(describe_cluster::handle(broker, session, r, version))
        }
        RequestKind::DeleteRecords(r) => body(delete_records::handle(broker, r)),
        RequestKind::DescribeLogDirs(r) => body(describe_log_dirs::handle(broker, r, version)),
        RequestKind::FindCoordinator(r) => {
            body(find_coordinator::handle(broker, session, r, version))
        }
        RequestKind::JoinGroup(r) => {
            // Kafka reports a member's host as "/<address>".
            let host = format!("/{}", session.peer.ip());
            body(groups.join_group(r, version, client_id, &host).await)
        }
        RequestKind::ConsumerGroupHeartbeat(r) => {
            let host = format!("/{}", session.peer.ip());
            let describable = |topic: &str| authz.topic(Operation::Describe, topic);
            body(groups.consumer_group_heartbeat(r, version, client_id, &host, &describable))
        }
        RequestKind::ConsumerGroupDescribe(r) => body(groups.consumer_group_describe(r, version)),
        RequestKind::SyncGroup(r) => body(groups.sync_group(r, version).await),
        RequestKind::Heartbeat(r) => body(groups.heartbeat(r, version)),
        RequestKind::LeaveGroup(r) => body(groups.leave_group(r, version)),
        RequestKind::OffsetCommit(r) => body(committed_offsets::offset_commit(broker, r, version)),
        RequestKind::OffsetFetch(r) => body(committed_offsets::offset_fetch(broker, r, version)),
        RequestKind::ListGroups(r) => body(groups.list_groups(r, version)),
        RequestKind::DescribeGroups(r) => body(groups.describe_groups(r, version)),
        RequestKind::DeleteGroups(r) => body(groups.delete_groups(r, version)),
        RequestKind::OffsetDelete(r) => body(groups.offset_delete(r, version)),
        RequestKind::DescribeClientQuotas(r) => body(describe_client_quotas::handle(broker, r)),
        RequestKind::AlterClientQuotas(r) => body(alter_client_quotas::handle(broker, r)),
        RequestKind::DescribeUserScramCredentials(r) => {
            body(describe_user_scram_credentials::handle(broker, r))
        }
        RequestKind::AlterUserScramCredentials(r) => {
            body(describe_user_scram_credentials::alter(broker, r))
        }
        RequestKind::DescribeTopicPartitions(r) => {
            body(describe_topic_partitions::handle(broker, authz, r))
        }
        RequestKind::DescribeAcls(r) => body(acls::describe(broker, r)),
        RequestKind::CreateAcls(r) => body(acls::create(broker, r)),
        RequestKind::DeleteAcls(r) => body(acls::delete(broker, r)),
        RequestKind::ElectLeaders(r) => body(elect_leaders::handle(broker, r)),
        RequestKind::WriteTxnMarkers(r) => {
            body(write_txn_markers::handle(broker, r, &request.newer))
        }
        RequestKind::AddPartitionsToTxn(r) => {
            let writable = |topic: &str| authz.topic(Operation::Write, topic);
            body(add_partitions_to_txn::handle(broker, r, version, &writable))
        }
        RequestKind::AddOffsetsToTxn(r) => {
            body(add_partitions_to_txn::add_offsets(broker, r, version))
        }
        RequestKind::EndTxn(r) => body(end_txn::handle(broker, r, version)),
        RequestKind::TxnOffsetCommit(r) => body(txn_offset_commit::handle(
            broker,
            authz,
            r,
            version,
            &request.newer,
        )),
        RequestKind::ListTransactions(r) => body(transactions_admin::list_transactions(broker, r)),
        RequestKind::DescribeTransactions(r) => {
            body(transactions_admin::describe_transactions(broker, r))
        }
        RequestKind::DescribeProducers(r) => {
            body(transactions_admin::describe_producers(broker, r))
        }
        RequestKind::SaslHandshake(r) => body(sasl::handshake_after_authentication(r)),
        RequestKind::SaslAuthenticate(r) => body(sasl::authenticate_after_authentication(r)),
        other => Reply::Finished(Outcome::Close(format!("no handler for {other:?}"))),
    }
}

/// `respond`, then mute the connection for `throttle_ms` when it is positive.
fn respond_throttled<R: Encodable + HeaderVersion>(
    correlation_id: i32,
    version: i16,
    body: &R,
    throttle_ms: i32,
) -> Outcome {
    match respond(correlation_id, version, body) {
        Outcome::Respond(response) if throttle_ms > 0 => Outcome::Throttle {
            response: Some(response),
            throttle_ms,
        },
        other => other,
    }
}

pub(crate) fn respond<R: Encodable + HeaderVersion>(
    correlation_id: i32,
    version: i16,
    body: &R,
) -> Outcome {
    match crate::protocol::encode_response(correlation_id, version, body) {
        Ok(frame) => Outcome::Respond(frame),
        Err(e) => encoding_failed(correlation_id, version, e),
    }
}

fn encoding_failed(correlation_id: i32, version: i16, e: anyhow::Error) -> Outcome {
    // A response we cannot encode is a sluice bug; closing tells the client to retry.
    tracing::error!(correlation_id, version, "cannot encode response: {e}");
    Outcome::Close(format!("response encoding failed: {e}"))
}
