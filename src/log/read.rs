//! The read side of a partition log: Kafka's fetch read (KIP-74 size rules) and the two
//! ListOffsets lookups, by timestamp and by max timestamp.
//!
//! Reads take `&self` and use positional reads only, so they never disturb appends' file state.
//! The high watermark and last stable offset are the caller's: it passes the bound as
//! `max_offset`, and decides what a lookup result at or beyond that bound means.

use bytes::Bytes;

use super::scan::{ScanStep, LOOKUP_CHUNK_BYTES};
use super::segment::{LogSegment, SegmentSlice};
use super::time_index::NO_TIMESTAMP;
use super::{LogError, PartitionLog, ReadInfo};
use crate::record_batch::records::find_record;

impl PartitionLog {
    /// Kafka's fetch read, copied into memory: see `read_slice`.
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        max_offset: i64,
    ) -> Result<ReadInfo, LogError> {
        let records = match self.read_slice(fetch_offset, max_bytes, min_one_batch, max_offset)? {
            Some(slice) => Bytes::from(slice.read_to_vec()?),
            None => Bytes::new(),
        };
        Ok(ReadInfo { records })
    }

    /// Kafka's fetch read. `fetch_offset` must lie in [log start offset, log end offset]. Returns
    /// the byte range of one segment starting at the first batch whose last offset is >=
    /// `fetch_offset` (it may start below it), stopping before any batch whose base offset is >=
    /// `max_offset`, and at most `max_bytes` long, which may cut the last batch short; None when
    /// there is nothing to read. With `min_one_batch` the first batch is returned whole even when
    /// larger than `max_bytes`; without it, a read that cannot hold one whole batch is empty,
    /// never a partial first batch. The range is a handle, not a copy (`SegmentSlice`).
    pub fn read_slice(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        max_offset: i64,
    ) -> Result<Option<SegmentSlice>, LogError> {
        if fetch_offset < self.log_start_offset || fetch_offset > self.log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                requested: fetch_offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        if fetch_offset == self.log_end_offset {
            return Ok(None);
        }
        for segment in self.segments_from(fetch_offset) {
            // Nothing in this segment reaches fetch_offset (an empty segment, or a gap left by
            // recovery): the answer starts in a later one, as in Kafka.
            let Some((start, header)) = segment.find_batch(fetch_offset)? else {
                continue;
            };
            let max_position = if max_offset >= self.segment_end_offset(segment) {
                segment.size_bytes()
            } else {
                segment.position_bound(max_offset)?
            };
            if start >= max_position {
                return Ok(None);
            }
            let first_batch_bytes = header.total_size();
            let limit = if min_one_batch {
                max_bytes.max(first_batch_bytes)
            } else {
                max_bytes
            };
            if limit < first_batch_bytes {
                return Ok(None);
            }
            let len = (max_position - start).min(limit as u64) as usize;
            return Ok(Some(segment.slice(start, len)));
        }
        Ok(None)
    }

    /// ListOffsets by timestamp (§2.7): the first record at or above the log start offset whose
    /// timestamp is >= `timestamp`, as (offset, timestamp). The segment is the first whose max
    /// timestamp reaches `timestamp`; the time index then the offset index give a start position;
    /// batches are scanned to the first whose max timestamp reaches `timestamp`, which is
    /// decompressed to find the record.
    pub fn find_offset_by_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>, LogError> {
        for segment in self.segments_from(self.log_start_offset) {
            if segment.max_timestamp_and_offset().0 < timestamp {
                continue;
            }
            let (_, indexed_offset) = segment.time_index.lookup(timestamp);
            let (_, start) = segment
                .offset_index
                .lookup(indexed_offset.max(self.log_start_offset));
            if let Some(found) = self.search_segment(segment, start, timestamp)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// Scans `segment` from `start` for the first record with timestamp >= `timestamp` and offset
    /// >= the log start offset.
    fn search_segment(
        &self,
        segment: &LogSegment,
        start: u64,
        timestamp: i64,
    ) -> Result<Option<(i64, i64)>, LogError> {
        let log_start_offset = self.log_start_offset;
        let mut scanner = segment.scanner(start, LOOKUP_CHUNK_BYTES);
        loop {
            let (position, header) = match scanner.next_header()? {
                ScanStep::Batch { position, header } => (position, header),
                ScanStep::End => return Ok(None),
                ScanStep::Torn { position } | ScanStep::Corrupt { position, .. } => {
                    return Err(LogError::Corrupt(format!(
                        "{}: unreadable batch at {position}",
                        segment.log_path().display()
                    )))
                }
            };
            if header.max_timestamp < timestamp || header.last_offset() < log_start_offset {
                continue;
            }
            let batch = scanner.read_batch(position, &header)?;
            let found = find_record(&batch, |offset, record_timestamp| {
                record_timestamp >= timestamp && offset >= log_start_offset
            })?;
            if let Some((offset, record_timestamp)) = found {
                return Ok(Some((offset, record_timestamp)));
            }
        }
    }

    /// For ListOffsets MAX_TIMESTAMP: (max timestamp, offset of the record holding it), from the
    /// first segment with the greatest max timestamp, as Kafka 4 answers. None when the log holds
    /// no batch. If the record cannot be read, the answer falls back to the last offset of the
    /// batch holding the max timestamp, which is what the time index records.
    pub fn max_timestamp_and_offset(&self) -> Option<(i64, i64)> {
        let mut best: Option<&LogSegment> = None;
        for segment in self.segments_from(i64::MIN) {
            if best.is_none_or(|best| {
                segment.max_timestamp_and_offset().0 > best.max_timestamp_and_offset().0
            }) {
                best = Some(segment);
            }
        }
        let segment = best?;
        match self.locate_max_timestamp(segment) {
            Ok(found) => found,
            Err(error) => {
                let (timestamp, offset) = segment.max_timestamp_and_offset();
                tracing::warn!(%error, timestamp, offset, "cannot read the record holding the max timestamp");
                (offset >= 0).then_some((timestamp, offset))
            }
        }
    }

    fn locate_max_timestamp(&self, segment: &LogSegment) -> Result<Option<(i64, i64)>, LogError> {
        let (max_timestamp, shallow_offset) = segment.max_timestamp_and_offset();
        let start = if shallow_offset >= 0 {
            segment.offset_index.lookup(shallow_offset).1
        } else {
            0
        };
        let Some((position, header)) =
            segment.first_batch_from(start, |h| h.max_timestamp == max_timestamp)?
        else {
            return Ok(None);
        };
        if max_timestamp == NO_TIMESTAMP {
            return Ok(Some((NO_TIMESTAMP, header.base_offset)));
        }
        let batch = segment.read_bytes(position, header.total_size())?;
        let found = find_record(&batch, |_, timestamp| timestamp == max_timestamp)?;
        Ok(Some(found.map_or(
            (max_timestamp, header.last_offset()),
            |(offset, timestamp)| (timestamp, offset),
        )))
    }
}
