//! Recovery of one segment (Kafka's `LogSegment.recover`): the `.log` is re-validated batch by
//! batch from its start, both indexes are rebuilt from what is valid, and the file is truncated
//! at the first batch that fails.

use super::{LogSegment, Recovered};
use crate::log::scan::{BatchScanner, ScanStep, RECOVERY_CHUNK_BYTES};
use crate::log::time_index::NO_TIMESTAMP;
use crate::log::{LogConfig, LogError};
use crate::record_batch::header::{BatchHeader, RECORD_BATCH_OVERHEAD};

impl LogSegment {
    /// Kafka's `LogSegment.recover`: rebuilds both indexes from the log while re-validating every
    /// batch (framing, size >= 61, CRC-32C, offsets increasing from `min_base_offset`, last offset
    /// fitting relative to the base and below `next_offset_bound`), and truncates the `.log` at the
    /// first batch that fails. Indexes end trimmed with the final time-index entry written.
    pub(in crate::log) fn recover(
        &mut self,
        config: &LogConfig,
        min_base_offset: i64,
        next_offset_bound: i64,
    ) -> Result<Recovered, LogError> {
        self.offset_index
            .file_mut()
            .reset(config.max_index_size_bytes)?;
        self.time_index
            .file_mut()
            .reset(config.max_index_size_bytes)?;
        self.max_timestamp_so_far = NO_TIMESTAMP;
        self.offset_of_max_timestamp_so_far = -1;
        self.rolling_based_timestamp = None;
        let file_len = self.log.metadata()?.len();
        let mut scanner = BatchScanner::new(&self.log, 0, file_len, RECOVERY_CHUNK_BYTES);
        let mut expected_min_base = min_base_offset.max(self.base_offset);
        let mut next_offset = self.base_offset;
        let mut valid_bytes = 0u64;
        let mut last_index_entry_position = 0u64;
        while let Some((position, header)) =
            self.next_valid_batch(&mut scanner, expected_min_base, next_offset_bound)?
        {
            if header.max_timestamp > self.max_timestamp_so_far {
                self.max_timestamp_so_far = header.max_timestamp;
                self.offset_of_max_timestamp_so_far = header.last_offset();
            }
            if position == 0 {
                self.rolling_based_timestamp = Some(header.max_timestamp);
            }
            if valid_bytes - last_index_entry_position > config.index_interval_bytes {
                // A rebuilt index may be sparser than the original if it fills up; that is safe.
                if !self.offset_index.is_full() && position <= i32::MAX as u64 {
                    self.offset_index.append(header.last_offset(), position)?;
                }
                if !self.time_index.is_full() {
                    let (timestamp, offset) = self.max_timestamp_and_offset();
                    self.time_index.maybe_append(timestamp, offset, false)?;
                }
                last_index_entry_position = valid_bytes;
            }
            valid_bytes += header.total_size() as u64;
            next_offset = header.last_offset() + 1;
            expected_min_base = next_offset;
        }
        let truncated_bytes = file_len - valid_bytes;
        if truncated_bytes > 0 {
            tracing::warn!(path = %self.log_path.display(), valid_bytes, truncated_bytes, "truncating segment during recovery");
            self.disk.set_len(&self.log, &self.log_path, valid_bytes)?;
        }
        self.size_bytes = valid_bytes;
        self.bytes_since_last_index_entry = valid_bytes - last_index_entry_position;
        self.on_become_inactive()?;
        Ok(Recovered {
            truncated_bytes,
            next_offset,
        })
    }

    /// The next batch that passes every recovery check, or None where the valid prefix ends.
    fn next_valid_batch(
        &self,
        scanner: &mut BatchScanner<'_>,
        expected_min_base: i64,
        next_offset_bound: i64,
    ) -> Result<Option<(u64, BatchHeader)>, LogError> {
        let path = self.log_path.display();
        let (position, header) = match scanner.next_header()? {
            ScanStep::Batch { position, header } => (position, header),
            ScanStep::End => return Ok(None),
            ScanStep::Torn { position } => {
                tracing::warn!(path = %path, position, "partial batch at the end of the segment");
                return Ok(None);
            }
            ScanStep::Corrupt { position, reason } => {
                tracing::warn!(path = %path, position, %reason, "corrupt batch");
                return Ok(None);
            }
        };
        let relative_last = header.last_offset() - self.base_offset;
        let problem = if header.last_offset_delta < 0 {
            Some("negative last offset delta")
        } else if header.base_offset < expected_min_base {
            Some("offsets do not increase")
        } else if relative_last > i64::from(i32::MAX) {
            Some("last offset does not fit relative to the base offset")
        } else if header.last_offset() >= next_offset_bound {
            Some("offsets overlap the next segment")
        } else if header.total_size() < RECORD_BATCH_OVERHEAD
            || !scanner.crc_matches(position, &header)?
        {
            Some("CRC-32C mismatch")
        } else {
            None
        };
        match problem {
            Some(reason) => {
                tracing::warn!(path = %path, position, base_offset = header.base_offset, reason, "invalid batch");
                Ok(None)
            }
            None => Ok(Some((position, header))),
        }
    }
}
