//! DescribeCluster (60): one broker, which is also the controller.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use super::{Broker, Session};

/// Every cluster operation (ALTER, ALTER_CONFIGS, CLUSTER_ACTION, CREATE, DESCRIBE,
/// DESCRIBE_CONFIGS, IDEMPOTENT_WRITE): there are no ACLs.
const ALL_CLUSTER_OPERATIONS: i32 =
    (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12);

pub fn handle(
    broker: &Broker,
    session: &Session,
    request: DescribeClusterRequest,
    version: i16,
) -> DescribeClusterResponse {
    let config = &broker.config;
    let node = DescribeClusterBroker::default()
        .with_broker_id(BrokerId(config.node_id))
        .with_host(StrBytes::from_string(
            broker.config.listeners[session.listener]
                .advertised
                .host
                .clone(),
        ))
        .with_port(i32::from(
            broker.config.listeners[session.listener].advertised.port,
        ));
    let mut response = DescribeClusterResponse::default()
        .with_cluster_id(StrBytes::from_string(broker.logs.cluster_id().to_string()))
        .with_controller_id(BrokerId(config.node_id))
        .with_brokers(vec![node]);
    if version >= 1 {
        response.endpoint_type = request.endpoint_type;
    }
    if request.include_cluster_authorized_operations {
        response.cluster_authorized_operations = ALL_CLUSTER_OPERATIONS;
    }
    response
}
