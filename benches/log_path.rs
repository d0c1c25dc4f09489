//! Criterion microbenchmarks of the hot path: decoding a Produce request, appending a batch to a
//! partition log (with index maintenance), reading batches back from the page cache, and the
//! record walk that validates a produced batch.
//! Run with `cargo bench --bench log_path`; throughput is reported in bytes per second.

use std::hint::black_box;

use bytes::{BufMut, Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, RequestHeader, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::records::Compression;
use sluice::log::{LogConfig, OpenOptions, PartitionLog};
use sluice::record_batch::encode::{self, PlainRecord};

const RECORD_BYTES: usize = 1024;
const RECORDS_PER_BATCH: usize = 16;

fn batch() -> Bytes {
    batch_of(RECORDS_PER_BATCH, Compression::None)
}

/// `count` records of 1 KiB values (a counter in each, the rest filler), compressed with
/// `compression`.
fn batch_of(count: usize, compression: Compression) -> Bytes {
    let records = (0..count).map(|i| {
        PlainRecord::new(
            Some(Bytes::from(format!("key-{i}"))),
            Some(Bytes::from(
                format!("{i:08}").repeat(RECORD_BYTES / 8).into_bytes(),
            )),
            1_700_000_000_000 + i as i64,
        )
    });
    encode::batch(records, compression).unwrap()
}

fn open_log(dir: &std::path::Path) -> PartitionLog {
    let config = LogConfig {
        segment_bytes: 256 << 20,
        ..LogConfig::from_topic(&sluice::config::Config::default().topic_values())
    };
    let options = OpenOptions {
        recovery_point: 0,
        log_start_offset: 0,
        clean_shutdown: true,
    };
    PartitionLog::open(
        &sluice::disk::Disk::real(),
        dir,
        config,
        options,
        1_700_000_000_000,
    )
    .expect("open log")
}

/// Appends on the target directory's disk (sustained, so bounded by the device once the
/// kernel's dirty-page limit is reached) and on tmpfs (the append code path alone).
fn append(c: &mut Criterion) {
    let template = batch();
    let mut group = c.benchmark_group("append");
    group.throughput(Throughput::Bytes(template.len() as u64));
    let shm = std::path::Path::new("/dev/shm");
    let targets = [
        ("disk", tempfile::tempdir()),
        ("tmpfs", tempfile::tempdir_in(shm)),
    ];
    for (name, dir) in targets {
        let Ok(dir) = dir else { continue };
        let mut log = open_log(dir.path());
        group.bench_function(format!("16KiB_batch_with_indexes_{name}"), |b| {
            let buf = template.to_vec();
            b.iter(|| {
                black_box(
                    log.append(&buf, 0, 1_700_000_000_000, false)
                        .expect("append"),
                )
            });
        });
    }
    group.finish();
}

fn read(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open_log(dir.path());
    let buf = batch().to_vec();
    for _ in 0..4096 {
        log.append(&buf, 0, 1_700_000_000_000, false)
            .expect("append");
    }
    let end = log.log_end_offset();
    let mut group = c.benchmark_group("read");
    const READ_BYTES: usize = 1 << 20;
    group.throughput(Throughput::Bytes(READ_BYTES as u64));
    let mut offset = 0;
    group.bench_function("1MiB_from_page_cache", |b| {
        b.iter(|| {
            let read = log.read(offset, READ_BYTES, true, end).expect("read");
            offset = (offset + 1000) % (end - 1000);
            black_box(read.records.len())
        })
    });
    // What a fetch does now: locate the range, copy nothing (the socket write uses sendfile).
    group.bench_function("1MiB_range_for_sendfile", |b| {
        b.iter(|| {
            let slice = log.read_slice(offset, READ_BYTES, true, end).expect("read");
            offset = (offset + 1000) % (end - 1000);
            black_box(slice.map_or(0, |slice| slice.len()))
        })
    });
    group.finish();
}

/// Produce validation's record walk over one uncompressed 16 KiB batch, and over an lz4 batch.
fn walk(c: &mut Criterion) {
    let batch = batch();
    let mut group = c.benchmark_group("walk");
    group.throughput(Throughput::Bytes(batch.len() as u64));
    group.bench_function("16KiB_uncompressed_batch", |b| {
        b.iter(|| {
            sluice::record_batch::walk::walk_records(
                0,
                &batch[61..],
                RECORDS_PER_BATCH as i32,
                1 << 30,
                |_, _, _| Ok(()),
            )
            .expect("walk")
        })
    });
    // 256 records, 256 KiB decompressed: several 64 KiB lz4 blocks, as a client's batch has.
    let lz4 = batch_of(256, Compression::Lz4);
    group.throughput(Throughput::Bytes(256 * RECORD_BYTES as u64));
    group.bench_function("256KiB_lz4_batch_decompressed", |b| {
        b.iter(|| {
            sluice::record_batch::walk::walk_records(3, &lz4[61..], 256, 1 << 30, |_, _, _| Ok(()))
                .expect("walk")
        })
    });
    group.finish();
}

fn decode(c: &mut Criterion) {
    let records = batch();
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(
            (0..8)
                .map(|t| {
                    TopicProduceData::default()
                        .with_name(TopicName(StrBytes::from_string(format!("topic-{t}"))))
                        .with_partition_data(vec![PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(records.clone()))])
                })
                .collect(),
        );
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Produce as i16)
        .with_request_api_version(9);
    let mut frame = BytesMut::new();
    frame.put_i32(0);
    header.encode(&mut frame, 2).expect("header");
    request.encode(&mut frame, 9).expect("body");
    let frame = frame.freeze().slice(4..);
    let mut group = c.benchmark_group("decode");
    group.throughput(Throughput::Bytes(frame.len() as u64));
    let versions = sluice::protocol::VersionTable::sluice();
    group.bench_function("produce_v9_8_partitions", |b| {
        b.iter_batched(
            || frame.clone(),
            |f| black_box(sluice::protocol::decode_request(f, &versions).expect("decode")),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, decode, append, read, walk);
criterion_main!(benches);
