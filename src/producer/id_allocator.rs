//! Producer ids unique for the life of the log directory. Ids are handed out from blocks of
//! `BLOCK_SIZE`; the end of the current block is made durable before any id of the block is
//! used, so after any restart (clean or not) allocation resumes past every id ever handed out.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::disk::Disk;

const BLOCK_SIZE: i64 = 1000;
use crate::disk::names::PRODUCER_ID_BLOCK_FILE;

pub struct ProducerIdAllocator {
    disk: Disk,
    path: PathBuf,
    /// (next id to hand out, end of the durable block, exclusive)
    state: Mutex<(i64, i64)>,
}

impl ProducerIdAllocator {
    pub fn open(disk: &Disk, log_dir: &Path) -> std::io::Result<ProducerIdAllocator> {
        let path = log_dir.join(PRODUCER_ID_BLOCK_FILE);
        let reserved_until = match disk.read_to_string_if_exists(&path)? {
            Some(text) => text.trim().parse::<i64>().map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            })?,
            None => 0,
        };
        Ok(ProducerIdAllocator {
            disk: disk.clone(),
            path,
            state: Mutex::new((reserved_until, reserved_until)),
        })
    }

    pub fn next_id(&self) -> std::io::Result<i64> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.0 >= state.1 {
            let end = state.1 + BLOCK_SIZE;
            self.disk
                .write_file_durably(&self.path, end.to_string().as_bytes())?;
            state.1 = end;
        }
        let id = state.0;
        state.0 += 1;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_never_reused_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let first = ProducerIdAllocator::open(&Disk::real(), dir.path()).unwrap();
        assert_eq!(first.next_id().unwrap(), 0);
        assert_eq!(first.next_id().unwrap(), 1);
        drop(first);
        let second = ProducerIdAllocator::open(&Disk::real(), dir.path()).unwrap();
        assert!(second.next_id().unwrap() >= 2);
    }
}
