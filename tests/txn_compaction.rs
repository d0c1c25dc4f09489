//! Compaction with transactions, as Kafka's cleaner does it: an aborted transaction's records
//! are removed, its marker stays until they are and its delete horizon has passed, a committed
//! transaction's marker goes once no record of it is left, and nothing at or past the last
//! stable offset (an open transaction) is cleaned. read_committed consumers never see an
//! aborted record, before or after any round.

mod common;

use common::data::create_topic_with_configs;
use common::txn::*;
use common::TestBroker;

const TOPIC: &str = "txn-compact";

fn plain(keys: &[&str], tag: &str) -> bytes::Bytes {
    let records = keys.iter().map(|k| {
        sluice::record_batch::encode::PlainRecord::new(
            Some(bytes::Bytes::from(k.to_string())),
            Some(bytes::Bytes::from(format!("{tag}-{k}"))),
            common::now_ms(),
        )
    });
    sluice::record_batch::encode::batch(records, kafka_protocol::records::Compression::None)
        .unwrap()
}

/// A transactional batch of the producer with one record per key, values `<tag>-<key>`.
fn keyed_txn(producer_id: i64, base_sequence: i32, keys: &[&str], tag: &str) -> bytes::Bytes {
    let records = keys
        .iter()
        .enumerate()
        .map(|(i, k)| kafka_protocol::records::Record {
            transactional: true,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch: 0,
            timestamp_type: kafka_protocol::records::TimestampType::Creation,
            offset: i as i64,
            sequence: base_sequence + i as i32,
            timestamp: common::now_ms(),
            key: Some(bytes::Bytes::from(k.to_string())),
            value: Some(bytes::Bytes::from(format!("{tag}-{k}"))),
            headers: Default::default(),
        })
        .collect::<Vec<_>>();
    let mut buf = bytes::BytesMut::new();
    let options = kafka_protocol::records::RecordEncodeOptions {
        version: 2,
        compression: kafka_protocol::records::Compression::None,
    };
    kafka_protocol::records::RecordBatchEncoder::encode(&mut buf, records.iter(), &options)
        .unwrap();
    buf.freeze()
}

async fn send(client: &mut common::Client, records: bytes::Bytes) {
    let response = produce_txn(client, 9, Some("tx"), TOPIC, 0, records).await;
    assert_eq!(response.error_code, 0, "{response:?}");
}

/// Values read_committed delivers, and every value in the log (read_uncommitted, markers left
/// out), and how many markers the log holds: fetched segment by segment, as a consumer does.
async fn contents(client: &mut common::Client) -> (Vec<String>, Vec<String>, usize) {
    let mut view = Vec::new();
    let mut offset = 0;
    loop {
        let data = fetch_at(client, TOPIC, 0, offset, READ_COMMITTED).await;
        let Some(next) = next_offset(&data.records) else {
            break;
        };
        offset = next;
        view.extend(committed_view(&data).into_iter().map(|(_, v)| v));
    }
    let all = all_records(client).await;
    let markers = all.iter().filter(|r| r.control).count();
    let values = all
        .into_iter()
        .filter(|r| !r.control)
        .map(|r| String::from_utf8_lossy(&r.value).into_owned())
        .collect();
    (view, values, markers)
}

/// Every record, markers included, read_uncommitted.
async fn all_records(client: &mut common::Client) -> Vec<Fetched> {
    let mut all = Vec::new();
    let mut offset = 0;
    loop {
        let data = fetch_at(client, TOPIC, 0, offset, READ_UNCOMMITTED).await;
        let Some(next) = next_offset(&data.records) else {
            break;
        };
        offset = next;
        all.extend(fetched(data.records));
    }
    all
}

/// New records of keys of their own, enough to roll a segment: the next round has dirty data.
async fn dirty(client: &mut common::Client, tag: &str) {
    for i in 0..4 {
        send(client, plain(&[&format!("{tag}{i}")], tag)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_records_go_and_markers_follow_their_transactions() {
    let overrides = [
        ("transaction.partition.verification.enable", "false"),
        ("log.segment.bytes", "300"),
    ];
    let broker = TestBroker::start_with_manual_clock(&overrides).await;
    let mut client = broker.client().await;
    let configs = [
        ("cleanup.policy", "compact"),
        ("min.cleanable.dirty.ratio", "0"),
        ("delete.retention.ms", "1000"),
    ];
    assert_eq!(
        create_topic_with_configs(&mut client, TOPIC, 1, &configs).await,
        0
    );
    let (aborted, committed, open) = (10, 20, 30);
    send(&mut client, keyed_txn(aborted, 0, &["a", "b"], "aborted")).await;
    send(
        &mut client,
        keyed_txn(committed, 0, &["c", "d"], "committed"),
    )
    .await;
    assert_eq!(
        write_marker(&mut client, TOPIC, 0, (aborted, 0), false, 0).await,
        0
    );
    assert_eq!(
        write_marker(&mut client, TOPIC, 0, (committed, 0), true, 0).await,
        0
    );
    send(&mut client, plain(&["e"], "plain")).await;
    // An open transaction, then a later version of its key.
    send(&mut client, keyed_txn(open, 0, &["f"], "open")).await;
    send(&mut client, plain(&["f"], "later")).await;
    dirty(&mut client, "x").await;
    let (view, values, markers) = contents(&mut client).await;
    assert_eq!(
        view,
        vec!["committed-c", "committed-d", "plain-e"],
        "the open transaction holds the rest back"
    );
    assert_eq!(markers, 2);
    let before = values.len();

    assert!(broker.run_cleaner_pass().await > 0, "a round ran");
    let (view, values, markers) = contents(&mut client).await;
    assert_eq!(view, vec!["committed-c", "committed-d", "plain-e"]);
    assert!(
        !values.iter().any(|v| v.starts_with("aborted")),
        "{values:?}"
    );
    assert_eq!(values.len(), before - 2, "only the aborted records went");
    assert!(
        values.contains(&"open-f".to_string()),
        "nothing past the last stable offset"
    );
    assert_eq!(markers, 2, "both markers stay: their horizons are stamped");

    // The open transaction commits, and the aborted producer writes again, so its emptied batch
    // is not its last one (a live producer's last batch stays, and with it its marker). The
    // ABORT marker goes within three rounds: its records went in the first, its emptied batch
    // in the next, then it gets a delete horizon and goes after it.
    assert_eq!(
        write_marker(&mut client, TOPIC, 0, (open, 0), true, 0).await,
        0
    );
    send(&mut client, keyed_txn(aborted, 2, &["q"], "q")).await;
    assert_eq!(
        write_marker(&mut client, TOPIC, 0, (aborted, 0), true, 0).await,
        0
    );
    for round in ["y", "w", "v"] {
        broker.advance_clock_ms(2_000);
        dirty(&mut client, round).await;
        broker.run_cleaner_pass().await;
    }
    let log = all_records(&mut client).await;
    let abort_markers = log
        .iter()
        .filter(|r| r.control && r.producer_id == aborted && r.offset < 13)
        .count();
    assert_eq!(abort_markers, 0, "{log:?}");
    let (view, _, _) = contents(&mut client).await;
    assert!(view.starts_with(&["committed-c".to_string(), "committed-d".to_string()]));
    assert!(
        !view.contains(&"open-f".to_string()),
        "compacted by its later version: {view:?}"
    );
    assert!(view.contains(&"later-f".to_string()) && view.contains(&"q-q".to_string()));
    // Later versions of the committed keys remove its records; the producer writes again, so
    // its emptied batch is not its last; then its marker goes after a horizon of its own.
    send(&mut client, plain(&["c", "d"], "newer")).await;
    send(&mut client, keyed_txn(committed, 2, &["z"], "again")).await;
    assert_eq!(
        write_marker(&mut client, TOPIC, 0, (committed, 0), true, 0).await,
        0
    );
    for round in 0..3 {
        broker.advance_clock_ms(2_000);
        dirty(&mut client, &format!("r{round}")).await;
        broker.run_cleaner_pass().await;
    }
    let (view, values, _) = contents(&mut client).await;
    assert!(
        !values.iter().any(|v| v.starts_with("committed")),
        "{values:?}"
    );
    assert!(view.contains(&"newer-c".to_string()) && view.contains(&"again-z".to_string()));
    let fetched = all_records(&mut client).await;
    let markers_of = |pid: i64| {
        fetched
            .iter()
            .filter(|r| r.control && r.producer_id == pid)
            .count()
    };
    assert_eq!(
        markers_of(committed),
        1,
        "only the marker of its transaction still in the log"
    );
}
