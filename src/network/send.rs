//! Writes a response frame made of chunks (`protocol::ResponseFrame`): bytes in memory with
//! `send`, and segment file ranges with `sendfile`, so fetched records go from the page cache to
//! the socket without passing through user space, as Kafka sends them.
//!
//! Over TLS the records must be encrypted in user space: `write_frame_tls` reads each file
//! range in pieces of at most `TLS_FILE_CHUNK_BYTES` into one buffer with `pread`, and rustls
//! encrypts each piece into its records, which are written to the socket. That is the copying
//! Kafka does over TLS (`SslTransportLayer.transferFrom` reads the file into a buffer that its
//! `SSLEngine` wraps). Kernel TLS, which would keep `sendfile`, needs the kernel's `tls` TCP
//! upper-layer protocol (see docs/security.md); where it is missing this is the path.
//!
//! Every chunk but the last is sent with `MSG_MORE`, so a partition's few header bytes leave in
//! the same TCP segment as its records instead of alone (the socket has `TCP_NODELAY`).
//! The file ranges are fixed under their partition's lock and segment bytes never change once
//! appended, so a range is always there to send, even from a segment deleted meanwhile (the open
//! handle keeps it). If a file is ever shorter than its range (someone truncated it behind the
//! broker's back) the frame cannot be completed: the connection is closed, never padded.

use crate::disk::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use tokio::io::{AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::TcpStream;

use crate::protocol::{Chunk, ResponseFrame};

/// Writes every chunk of `frame`, in order.
pub async fn write_frame(stream: &TcpStream, frame: &ResponseFrame) -> io::Result<()> {
    let last = frame.chunks.len().saturating_sub(1);
    for (i, chunk) in frame.chunks.iter().enumerate() {
        match chunk {
            Chunk::Bytes(bytes) => send_bytes(stream, bytes, i < last).await?,
            Chunk::File {
                file,
                position,
                len,
            } => send_file(stream, file, *position, *len).await?,
        }
    }
    Ok(())
}

/// The most record bytes read from a segment at a time to be encrypted: one TLS record's
/// plaintext (16 KiB) times four, so that each write hands rustls a few whole records.
pub const TLS_FILE_CHUNK_BYTES: usize = 64 * 1024;

/// Writes every chunk of `frame` through a TLS stream: file ranges through one bounded buffer.
pub async fn write_frame_tls<W: AsyncWrite + Unpin>(
    writer: &mut W,
    frame: &ResponseFrame,
) -> io::Result<()> {
    let mut buffer = Vec::new();
    for chunk in &frame.chunks {
        match chunk {
            Chunk::Bytes(bytes) => writer.write_all(bytes).await?,
            Chunk::File {
                file,
                position,
                len,
            } => {
                let (mut position, mut remaining) = (*position, *len);
                buffer.resize(remaining.min(TLS_FILE_CHUNK_BYTES), 0);
                while remaining > 0 {
                    let piece = remaining.min(buffer.len());
                    let read = file.read_at(&mut buffer[..piece], position)?;
                    if read == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "segment file shorter than the range being sent",
                        ));
                    }
                    writer.write_all(&buffer[..read]).await?;
                    position += read as u64;
                    remaining -= read;
                }
            }
        }
    }
    writer.flush().await
}

async fn send_bytes(stream: &TcpStream, mut bytes: &[u8], more: bool) -> io::Result<()> {
    let flags = libc::MSG_NOSIGNAL | if more { libc::MSG_MORE } else { 0 };
    while !bytes.is_empty() {
        let sent = retry_when_writable(stream, || {
            // SAFETY: the pointer and length describe `bytes`, which outlives the call.
            let n = unsafe {
                libc::send(
                    stream.as_raw_fd(),
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    flags,
                )
            };
            ok_count(n)
        })
        .await?;
        bytes = &bytes[sent..];
    }
    Ok(())
}

async fn send_file(stream: &TcpStream, file: &File, position: u64, len: usize) -> io::Result<()> {
    let mut offset = libc::off_t::try_from(position).map_err(io::Error::other)?;
    let mut remaining = len;
    while remaining > 0 {
        let sent = retry_when_writable(stream, || {
            // SAFETY: both descriptors are open for the call's duration, and `offset` is a valid
            // off_t that sendfile advances by the bytes sent.
            let n = unsafe {
                libc::sendfile(stream.as_raw_fd(), file.as_raw_fd(), &mut offset, remaining)
            };
            ok_count(n)
        })
        .await?;
        if sent == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "segment file shorter than the range being sent",
            ));
        }
        remaining -= sent;
    }
    Ok(())
}

/// Runs the non-blocking `io` once the socket is writable, again whenever it would block.
async fn retry_when_writable(
    stream: &TcpStream,
    mut io: impl FnMut() -> io::Result<usize>,
) -> io::Result<usize> {
    loop {
        stream.writable().await?;
        match stream.try_io(Interest::WRITABLE, &mut io) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            result => return result,
        }
    }
}

fn ok_count(n: isize) -> io::Result<usize> {
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}
