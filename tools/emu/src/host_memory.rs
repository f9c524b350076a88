// SPDX-License-Identifier: GPL-2.0
//! Host (guest-physical) memory as the card sees it from its PCIe tile.
//!
//! QEMU's vfio-user client tells the server which IOVA ranges the device
//! may reach with `dma_map` messages. With shared guest memory
//! (`memory-backend-memfd,share=on`) each message carries an fd and an
//! offset that the server maps here; without one the range is known but
//! cannot be reached (QEMU also maps such ranges, e.g. device BARs).
//! The permissions of a mapping are those of the IOMMU entry behind it: a
//! READ-only pin is memory the card may read but not write.
//!
//! Reads and writes copy through the mapping while holding a read lock, so
//! an unmap (write lock) waits for accesses in flight and never pulls memory
//! from under them.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::RwLock;

/// Why the card could not reach host memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DmaError {
    /// No mapping covers this IOVA: on real hardware an IOMMU fault or a
    /// master abort.
    Unmapped(u64),
    /// The mapping at this IOVA does not let the device write.
    ReadOnly(u64),
    /// The mapping at this IOVA does not let the device read.
    WriteOnly(u64),
    /// The range is mapped but QEMU gave no fd for it (guest memory not
    /// shared, or a range that is not RAM), so the emulator cannot reach it.
    NoBacking(u64),
    /// The access wraps around the 64-bit IOVA space.
    Overflow(u64),
}

impl fmt::Display for DmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DmaError::Unmapped(a) => write!(f, "unmapped IOVA {a:#x}"),
            DmaError::ReadOnly(a) => write!(f, "IOVA {a:#x} is mapped read-only"),
            DmaError::WriteOnly(a) => write!(f, "IOVA {a:#x} is mapped write-only"),
            DmaError::NoBacking(a) => write!(f, "IOVA {a:#x} is mapped without shared memory"),
            DmaError::Overflow(a) => write!(f, "access at IOVA {a:#x} wraps around"),
        }
    }
}

impl std::error::Error for DmaError {}

/// One mmap of a file QEMU sent, shared by the mapping records cut from it.
struct Mmap {
    base: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is plain shared memory with no thread affinity; all
// access goes through `HostMemory`'s lock.
unsafe impl Send for Mmap {}
// SAFETY: as above: concurrent reads of the raw pointer are harmless, and
// the memory behind it is accessed under `HostMemory`'s lock.
unsafe impl Sync for Mmap {}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly what mmap returned, and the last
        // record using them is gone.
        unsafe {
            libc::munmap(self.base, self.len);
        }
    }
}

/// A mapped IOVA range.
struct Mapping {
    size: u64,
    readable: bool,
    writable: bool,
    /// Where IOVA `start` of this record is in our address space, with the
    /// mmap it lives in; None when QEMU sent no fd.
    backing: Option<(std::sync::Arc<Mmap>, usize)>,
}

impl Mapping {
    /// The part of this record from `skip` bytes in, `size` long.
    fn slice(&self, skip: u64, size: u64) -> Mapping {
        Mapping {
            size,
            readable: self.readable,
            writable: self.writable,
            backing: self
                .backing
                .as_ref()
                .map(|(m, off)| (m.clone(), off + skip as usize)),
        }
    }
}

/// The IOVA space the card reaches through its PCIe tile.
#[derive(Default)]
pub struct HostMemory {
    /// Mappings by start IOVA; they never overlap.
    maps: RwLock<BTreeMap<u64, Mapping>>,
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

impl HostMemory {
    /// An IOVA space with nothing mapped.
    pub fn new() -> Self {
        Self::default()
    }

    /// Maps `size` bytes of `file` from `file_offset` at `iova`, as a
    /// `dma_map` with an fd asks. A range already mapped is replaced.
    pub fn map(
        &self,
        iova: u64,
        size: u64,
        file_offset: u64,
        file: File,
        readable: bool,
        writable: bool,
    ) -> io::Result<()> {
        if size == 0 {
            return Ok(());
        }
        if iova.checked_add(size).is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "IOVA range wraps",
            ));
        }
        // mmap wants a page-aligned file offset: map from the page start
        // and skip the difference.
        let page = page_size();
        let aligned = file_offset & !(page - 1);
        let skip = file_offset - aligned;
        let len = usize::try_from(size + skip)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "mapping too large"))?;
        let offset = libc::off_t::try_from(aligned)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file offset too large"))?;
        let mut prot = 0;
        if readable || writable {
            // x86 cannot map write-only; reads are refused by our own check.
            prot |= libc::PROT_READ;
        }
        if writable {
            prot |= libc::PROT_WRITE;
        }
        // SAFETY: a fresh shared mapping of an fd we own; nothing else in
        // this process uses the address range the kernel picks.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                offset,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // The mapping keeps the file's memory alive; the fd can go.
        drop(file);
        let mmap = std::sync::Arc::new(Mmap { base, len });
        self.insert(iova, size, readable, writable, Some((mmap, skip as usize)));
        Ok(())
    }

    /// Records a range QEMU mapped without an fd: present, but every
    /// access to it fails with [`DmaError::NoBacking`].
    pub fn map_without_fd(&self, iova: u64, size: u64, readable: bool, writable: bool) {
        if size == 0 || iova.checked_add(size).is_none() {
            return;
        }
        self.insert(iova, size, readable, writable, None);
    }

    /// Records a mapping, replacing whatever it overlaps.
    fn insert(
        &self,
        iova: u64,
        size: u64,
        readable: bool,
        writable: bool,
        backing: Option<(std::sync::Arc<Mmap>, usize)>,
    ) {
        let mut maps = self.maps.write().unwrap_or_else(|e| e.into_inner());
        Self::remove_range(&mut maps, iova, size);
        let mapping = Mapping {
            size,
            readable,
            writable,
            backing,
        };
        maps.insert(iova, mapping);
    }

    /// Unmaps `[iova, iova + size)`. Mappings partly inside keep their
    /// outside parts (the vfio-user spec asks QEMU to unmap whole
    /// mappings, but nothing is lost if it does not).
    pub fn unmap(&self, iova: u64, size: u64) {
        let mut maps = self.maps.write().unwrap_or_else(|e| e.into_inner());
        Self::remove_range(&mut maps, iova, size);
    }

    /// Unmaps everything (`VFIO_DMA_UNMAP_FLAG_ALL`).
    pub fn unmap_all(&self) {
        self.maps.write().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// How many mappings there are: the control socket shows it.
    pub fn mapping_count(&self) -> usize {
        self.maps.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn remove_range(maps: &mut BTreeMap<u64, Mapping>, iova: u64, size: u64) {
        if size == 0 {
            return;
        }
        let end = iova.saturating_add(size);
        let hit: Vec<u64> = maps
            .range(..end)
            .filter(|(start, m)| start.saturating_add(m.size) > iova)
            .map(|(start, _)| *start)
            .collect();
        for start in hit {
            let m = maps.remove(&start).expect("key listed just now");
            let m_end = start + m.size;
            if start < iova {
                maps.insert(start, m.slice(0, iova - start));
            }
            if m_end > end {
                maps.insert(end, m.slice(end - start, m_end - end));
            }
            // Dropping `m` releases its share of the mmap; the munmap
            // happens when no record uses it any more.
        }
    }

    /// Walks the mappings covering `[iova, iova + len)` in order, calling
    /// `f(mapping, IOVA, offset into mapping, offset into buffer, length)`
    /// for each piece; an IOVA no mapping covers ends the walk with
    /// [`DmaError::Unmapped`].
    fn walk(
        maps: &BTreeMap<u64, Mapping>,
        iova: u64,
        len: usize,
        mut f: impl FnMut(&Mapping, u64, u64, usize, usize) -> Result<(), DmaError>,
    ) -> Result<(), DmaError> {
        if len == 0 {
            return Ok(());
        }
        if iova.checked_add(len as u64 - 1).is_none() {
            return Err(DmaError::Overflow(iova));
        }
        let mut done = 0usize;
        while done < len {
            let at = iova + done as u64;
            let Some((start, m)) = maps.range(..=at).next_back() else {
                return Err(DmaError::Unmapped(at));
            };
            let into = at - start;
            if into >= m.size {
                return Err(DmaError::Unmapped(at));
            }
            let n = ((m.size - into).min((len - done) as u64)) as usize;
            f(m, at, into, done, n)?;
            done += n;
        }
        Ok(())
    }

    /// A device access of `len` bytes at `iova` (`write`: the device
    /// writes). The whole range is checked first, so a refused access
    /// changes nothing; then `copy(host pointer, offset into the caller's
    /// buffer, length)` runs for each piece. One read lock covers both, so
    /// no unmap can come between them.
    fn access(
        &self,
        iova: u64,
        len: usize,
        write: bool,
        mut copy: impl FnMut(*mut u8, usize, usize),
    ) -> Result<(), DmaError> {
        let maps = self.maps.read().unwrap_or_else(|e| e.into_inner());
        Self::walk(&maps, iova, len, |m, at, _, _, _| check(m, at, write))?;
        Self::walk(&maps, iova, len, |m, at, into, done, n| {
            copy(pointer(m, at, into)?, done, n);
            Ok(())
        })
    }

    /// Reads host memory at `iova` into `buf`, as a device read would.
    pub fn read(&self, iova: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        self.access(iova, buf.len(), false, |ptr, done, n| {
            // SAFETY: `ptr..ptr + n` lies inside a live readable mapping
            // (held by the read lock); `buf[done..done + n]` is ours. The
            // guest may write the same memory concurrently, as it may race
            // a real device: we copy whatever bytes are there.
            unsafe { std::ptr::copy_nonoverlapping(ptr, buf[done..].as_mut_ptr(), n) };
        })
    }

    /// Writes `buf` to host memory at `iova`, as a device write would.
    pub fn write(&self, iova: u64, buf: &[u8]) -> Result<(), DmaError> {
        self.access(iova, buf.len(), true, |ptr, done, n| {
            // SAFETY: `ptr..ptr + n` lies inside a live writable mapping
            // (held by the read lock, mapped PROT_WRITE since `writable`).
            unsafe { std::ptr::copy_nonoverlapping(buf[done..].as_ptr(), ptr, n) };
        })
    }
}

fn check(m: &Mapping, at: u64, write: bool) -> Result<(), DmaError> {
    if m.backing.is_none() {
        return Err(DmaError::NoBacking(at));
    }
    if write && !m.writable {
        return Err(DmaError::ReadOnly(at));
    }
    if !write && !m.readable {
        return Err(DmaError::WriteOnly(at));
    }
    Ok(())
}

fn pointer(m: &Mapping, at: u64, into: u64) -> Result<*mut u8, DmaError> {
    let (mmap, off) = m.backing.as_ref().ok_or(DmaError::NoBacking(at))?;
    // SAFETY: `off + into` is within the mmap: records are cut from it and
    // `into < size` was checked by the caller.
    Ok(unsafe { (mmap.base as *mut u8).add(off + into as usize) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::os::fd::FromRawFd;

    fn memfd(len: u64) -> File {
        let name = c"tt-emu-test";
        // SAFETY: a valid NUL-terminated name; the fd returned is ours.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), 0) };
        assert!(fd >= 0, "memfd_create: {}", io::Error::last_os_error());
        // SAFETY: fd is a fresh descriptor nobody else owns.
        let f = unsafe { File::from_raw_fd(fd) };
        f.set_len(len).unwrap();
        f
    }

    #[test]
    fn reads_and_writes_reach_the_file() {
        let mut f = memfd(0x4000);
        f.seek(SeekFrom::Start(0x1000)).unwrap();
        f.write_all(b"guest data").unwrap();
        let hm = HostMemory::new();
        // IOVA 0x10_0000 is file offset 0x1000.
        hm.map(
            0x10_0000,
            0x2000,
            0x1000,
            f.try_clone().unwrap(),
            true,
            true,
        )
        .unwrap();
        let mut buf = [0u8; 10];
        hm.read(0x10_0000, &mut buf).unwrap();
        assert_eq!(&buf, b"guest data");

        hm.write(0x10_0005, b"DMA").unwrap();
        let mut back = [0u8; 10];
        f.seek(SeekFrom::Start(0x1000)).unwrap();
        f.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"guestDMAta");
    }

    #[test]
    fn unaligned_file_offsets_work() {
        let mut f = memfd(0x3000);
        f.seek(SeekFrom::Start(0x1234)).unwrap();
        f.write_all(&[0xab]).unwrap();
        let hm = HostMemory::new();
        hm.map(0x5000, 0x100, 0x1234, f, true, false).unwrap();
        let mut b = [0];
        hm.read(0x5000, &mut b).unwrap();
        assert_eq!(b[0], 0xab);
    }

    #[test]
    fn read_only_mappings_refuse_writes() {
        let hm = HostMemory::new();
        hm.map(0x1000, 0x1000, 0, memfd(0x1000), true, false)
            .unwrap();
        assert_eq!(
            hm.write(0x1800, &[1, 2, 3]),
            Err(DmaError::ReadOnly(0x1800))
        );
        let mut b = [0xff; 3];
        hm.read(0x1800, &mut b).unwrap();
        assert_eq!(b, [0, 0, 0], "the refused write changed nothing");
    }

    #[test]
    fn write_only_mappings_refuse_reads() {
        let hm = HostMemory::new();
        hm.map(0x1000, 0x1000, 0, memfd(0x1000), false, true)
            .unwrap();
        hm.write(0x1000, &[7]).unwrap();
        let mut b = [0];
        assert_eq!(hm.read(0x1000, &mut b), Err(DmaError::WriteOnly(0x1000)));
    }

    #[test]
    fn unmapped_and_fdless_ranges_fail() {
        let hm = HostMemory::new();
        let mut b = [0u8; 4];
        assert_eq!(hm.read(0x1000, &mut b), Err(DmaError::Unmapped(0x1000)));
        hm.map_without_fd(0x1000, 0x1000, true, true);
        assert_eq!(hm.read(0x1000, &mut b), Err(DmaError::NoBacking(0x1000)));
        assert_eq!(hm.write(0x1ffe, &b), Err(DmaError::NoBacking(0x1ffe)));
        // The access running past the mapping's end fails without writing.
        hm.map(0x4000, 0x1000, 0, memfd(0x1000), true, true)
            .unwrap();
        assert_eq!(hm.write(0x4ffe, &b), Err(DmaError::Unmapped(0x5000)));
        let mut two = [0xff; 2];
        hm.read(0x4ffe, &mut two).unwrap();
        assert_eq!(two, [0, 0]);
        assert_eq!(hm.read(u64::MAX, &mut b), Err(DmaError::Overflow(u64::MAX)));
    }

    #[test]
    fn accesses_span_adjacent_mappings() {
        let hm = HostMemory::new();
        let a = memfd(0x1000);
        let b = memfd(0x1000);
        hm.map(0x0, 0x1000, 0, a, true, true).unwrap();
        hm.map(0x1000, 0x1000, 0, b, true, true).unwrap();
        hm.write(0xffe, &[1, 2, 3, 4]).unwrap();
        let mut out = [0; 4];
        hm.read(0xffe, &mut out).unwrap();
        assert_eq!(out, [1, 2, 3, 4]);
    }

    #[test]
    fn unmap_removes_and_splits() {
        let hm = HostMemory::new();
        hm.map(0x10000, 0x3000, 0, memfd(0x3000), true, true)
            .unwrap();
        hm.write(0x10000, &[1]).unwrap();
        hm.write(0x12000, &[3]).unwrap();
        // Unmap the middle page only.
        hm.unmap(0x11000, 0x1000);
        let mut b = [0];
        assert_eq!(hm.read(0x11000, &mut b), Err(DmaError::Unmapped(0x11000)));
        hm.read(0x10000, &mut b).unwrap();
        assert_eq!(b[0], 1);
        hm.read(0x12000, &mut b).unwrap();
        assert_eq!(b[0], 3);
        assert_eq!(hm.mapping_count(), 2);
        hm.unmap(0x10000, 0x3000);
        assert_eq!(hm.mapping_count(), 0);
        assert_eq!(hm.read(0x12000, &mut b), Err(DmaError::Unmapped(0x12000)));
    }

    #[test]
    fn remapping_replaces() {
        let hm = HostMemory::new();
        hm.map(0x1000, 0x1000, 0, memfd(0x1000), true, true)
            .unwrap();
        hm.map_without_fd(0x1000, 0x1000, true, true);
        let mut b = [0];
        assert_eq!(hm.read(0x1000, &mut b), Err(DmaError::NoBacking(0x1000)));
        hm.unmap_all();
        assert_eq!(hm.read(0x1000, &mut b), Err(DmaError::Unmapped(0x1000)));
    }

    #[test]
    fn host_memory_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<HostMemory>();
    }
}
