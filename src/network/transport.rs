//! A connection's two directions, over plain TCP or TLS. Plain TCP writes record chunks with
//! `sendfile` (`send.rs`); TLS must encrypt them in user space (`send::write_frame_tls`).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use super::send::{write_frame, write_frame_tls};
use crate::protocol::ResponseFrame;

pub type Tls = TlsStream<TcpStream>;

pub enum ReadSide {
    Plain(OwnedReadHalf),
    Tls(ReadHalf<Tls>),
}

pub enum WriteSide {
    Plain(OwnedWriteHalf),
    Tls(WriteHalf<Tls>),
}

impl AsyncRead for ReadSide {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ReadSide::Plain(r) => Pin::new(r).poll_read(cx, buf),
            ReadSide::Tls(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

impl WriteSide {
    /// Writes bytes that are a whole response (or a raw SASL token frame).
    pub async fn write_bytes(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            WriteSide::Plain(w) => w.write_all(bytes).await,
            WriteSide::Tls(w) => {
                w.write_all(bytes).await?;
                w.flush().await
            }
        }
    }

    /// Writes a response whose records are chunks of segment files.
    pub async fn write_frame(&mut self, frame: &ResponseFrame) -> io::Result<()> {
        match self {
            WriteSide::Plain(w) => write_frame(w.as_ref(), frame).await,
            WriteSide::Tls(w) => write_frame_tls(w, frame).await,
        }
    }
}

/// Splits a plain stream.
pub fn split_plain(stream: TcpStream) -> (ReadSide, WriteSide) {
    let (r, w) = stream.into_split();
    (ReadSide::Plain(r), WriteSide::Plain(w))
}

/// Splits a TLS stream.
pub fn split_tls(stream: Tls) -> (ReadSide, WriteSide) {
    let (r, w) = tokio::io::split(stream);
    (ReadSide::Tls(r), WriteSide::Tls(w))
}
