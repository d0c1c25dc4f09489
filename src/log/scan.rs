//! Forward iteration over the batches of one `.log` file, reading through a small reusable buffer
//! with positional reads so that a scan needs only `&File` and bounded memory.
//!
//! It owns the distinction between a torn tail (the file ends inside a batch: an interrupted
//! write) and corruption (bytes that can never start a batch), and CRC verification streamed in
//! chunks so a huge or garbage `batchLength` never turns into a huge allocation. It does not decide
//! what to do about either; the segment does.

use crate::disk::File;
use std::io;
use std::os::unix::fs::FileExt;

use crate::record_batch::header::{
    check_frame, BatchHeader, Frame, CRC_COVERED_FROM, RECORD_BATCH_OVERHEAD,
};

/// Buffer for header-only scans (lookups): an index interval's worth of small batches.
pub(super) const LOOKUP_CHUNK_BYTES: usize = 16 * 1024;
/// Buffer for validating scans (recovery), which read every byte.
pub(super) const RECOVERY_CHUNK_BYTES: usize = 1024 * 1024;

pub(super) enum ScanStep {
    Batch {
        position: u64,
        header: BatchHeader,
    },
    /// The scan reached `end` exactly on a batch boundary.
    End,
    /// The bytes from `position` to `end` are a partial batch.
    Torn {
        position: u64,
    },
    /// The bytes at `position` cannot start a batch.
    Corrupt {
        position: u64,
        reason: String,
    },
}

pub(super) struct BatchScanner<'f> {
    file: &'f File,
    /// Exclusive scan limit: the segment's valid size, never the raw file length of a segment
    /// being written, so a reader never sees half of an append.
    end: u64,
    position: u64,
    buf: Vec<u8>,
    /// File position of `buf[0]`.
    buf_start: u64,
    chunk_bytes: usize,
}

impl<'f> BatchScanner<'f> {
    pub(super) fn new(file: &'f File, start: u64, end: u64, chunk_bytes: usize) -> Self {
        BatchScanner {
            file,
            end,
            position: start,
            buf: Vec::new(),
            buf_start: start,
            chunk_bytes,
        }
    }

    /// Reads the next header and steps over its batch. After anything but `Batch`, the scanner
    /// stays where it stopped.
    pub(super) fn next_header(&mut self) -> io::Result<ScanStep> {
        let position = self.position;
        if position >= self.end {
            return Ok(ScanStep::End);
        }
        let remaining = self.end - position;
        let wanted = remaining.min(RECORD_BATCH_OVERHEAD as u64) as usize;
        let prefix = self.buffered(position, wanted)?;
        match check_frame(prefix, remaining) {
            Frame::Torn => Ok(ScanStep::Torn { position }),
            Frame::Corrupt(error) => Ok(ScanStep::Corrupt {
                position,
                reason: error.to_string(),
            }),
            Frame::Whole(total) => match BatchHeader::parse(prefix) {
                Ok(header) => {
                    self.position = position + total as u64;
                    Ok(ScanStep::Batch { position, header })
                }
                Err(error) => Ok(ScanStep::Corrupt {
                    position,
                    reason: error.to_string(),
                }),
            },
        }
    }

    /// Recomputes the CRC-32C of the batch at `position` chunk by chunk and compares it with the
    /// stored one.
    pub(super) fn crc_matches(&mut self, position: u64, header: &BatchHeader) -> io::Result<bool> {
        let mut at = position + CRC_COVERED_FROM as u64;
        let batch_end = position + header.total_size() as u64;
        let mut crc = 0u32;
        while at < batch_end {
            let wanted = (batch_end - at).min(self.chunk_bytes as u64) as usize;
            crc = crc32c::crc32c_append(crc, self.buffered(at, wanted)?);
            at += wanted as u64;
        }
        Ok(crc == header.crc)
    }

    /// Reads the whole batch at `position` into a new buffer.
    pub(super) fn read_batch(&self, position: u64, header: &BatchHeader) -> io::Result<Vec<u8>> {
        let mut batch = vec![0u8; header.total_size()];
        self.file.read_exact_at(&mut batch, position)?;
        Ok(batch)
    }

    /// Returns `len` bytes at `position`, refilling the buffer when they are not all in it.
    /// `position + len` never exceeds `end`, so `len` is bounded by the file, and it is at most
    /// `max(chunk_bytes, 61)`.
    fn buffered(&mut self, position: u64, len: usize) -> io::Result<&[u8]> {
        let buffered_end = self.buf_start + self.buf.len() as u64;
        if position < self.buf_start || position + len as u64 > buffered_end {
            let fill = (self.end - position).min(self.chunk_bytes.max(len) as u64) as usize;
            self.buf.resize(fill, 0);
            self.file.read_exact_at(&mut self.buf, position)?;
            self.buf_start = position;
        }
        let from = (position - self.buf_start) as usize;
        Ok(&self.buf[from..from + len])
    }
}
