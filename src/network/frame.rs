//! Kafka's framing: a big-endian i32 size followed by that many bytes. The size is bounded by
//! `socket.request.max.bytes` before anything is allocated, and the size and the body are read
//! separately so the connection can reserve memory in between.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

#[derive(Debug)]
pub enum FrameError {
    /// The peer announced a size outside 1..=max; Kafka closes such connections.
    InvalidSize(i32),
    Io(std::io::Error),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::InvalidSize(n) => write!(f, "invalid frame size {n}"),
            FrameError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// Reads one frame; `Ok(None)` on a clean end of stream between frames.
#[cfg(test)]
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    max_bytes: usize,
) -> Result<Option<Bytes>, FrameError> {
    match read_frame_size(reader, max_bytes).await? {
        Some(len) => read_frame_body(reader, len).await.map(Some),
        None => Ok(None),
    }
}

/// Reads a frame's size prefix and bounds it; `Ok(None)` on a clean end of stream between
/// frames. Nothing is allocated, so the caller can wait for memory before reading the body.
pub async fn read_frame_size<R: AsyncRead + Unpin>(
    reader: &mut R,
    max_bytes: usize,
) -> Result<Option<usize>, FrameError> {
    let mut size = [0u8; 4];
    match reader.read_exact(&mut size).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(FrameError::Io(e)),
    }
    let size = i32::from_be_bytes(size);
    let len = usize::try_from(size)
        .ok()
        .filter(|&n| n > 0 && n <= max_bytes)
        .ok_or(FrameError::InvalidSize(size))?;
    Ok(Some(len))
}

/// Reads the `len` bytes of a frame's body into a buffer that is not zeroed first: `read_buf`
/// fills its spare capacity, and `take` keeps it from reading past the frame.
pub async fn read_frame_body<R: AsyncRead + Unpin>(
    reader: &mut R,
    len: usize,
) -> Result<Bytes, FrameError> {
    let mut frame = BytesMut::with_capacity(len);
    let mut body = reader.take(len as u64);
    while frame.len() < len {
        let read = body.read_buf(&mut frame).await.map_err(FrameError::Io)?;
        if read == 0 {
            let eof = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "frame cut short");
            return Err(FrameError::Io(eof));
        }
    }
    Ok(frame.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bounds_size_before_allocating() {
        let mut huge: &[u8] = &[0x7f, 0xff, 0xff, 0xff];
        assert!(matches!(
            read_frame(&mut huge, 1024).await,
            Err(FrameError::InvalidSize(_))
        ));
        let mut negative: &[u8] = &[0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            read_frame(&mut negative, 1024).await,
            Err(FrameError::InvalidSize(-1))
        ));
        let mut ok: &[u8] = &[0, 0, 0, 2, 7, 8, 0, 0];
        assert_eq!(
            read_frame(&mut ok, 1024).await.unwrap().unwrap(),
            Bytes::from_static(&[7, 8])
        );
        assert!(
            read_frame(&mut ok, 1024).await.unwrap().is_none(),
            "a torn size prefix ends the stream"
        );
        let mut empty: &[u8] = &[];
        assert!(read_frame(&mut empty, 1024).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn bodies_stop_at_their_frame_and_must_be_whole() {
        let mut two: &[u8] = &[0, 0, 0, 2, 7, 8, 0, 0, 0, 1, 9];
        assert_eq!(
            &read_frame(&mut two, 1024).await.unwrap().unwrap()[..],
            &[7, 8]
        );
        assert_eq!(
            &read_frame(&mut two, 1024).await.unwrap().unwrap()[..],
            &[9]
        );
        let mut short: &[u8] = &[0, 0, 0, 4, 1, 2];
        assert!(matches!(
            read_frame(&mut short, 1024).await,
            Err(FrameError::Io(_))
        ));
    }
}
