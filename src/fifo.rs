// SPDX-License-Identifier: GPL-2.0

//! A first-in first-out queue of waiters.
//!
//! Grants take waiters from the front, so the front must come out in
//! constant time however long the queue is: a `KVec` shifts everything
//! behind it (a release with 1000 waiters queued moved 8 KiB). This is a
//! ring over a `KVec`; only a waiter leaving from the middle (a signal, a
//! deadline) shifts the ones behind it.

use kernel::{
    alloc::{
        AllocError,
        Flags, //
    },
    prelude::*, //
};

/// A FIFO queue that grows as needed.
///
/// # Invariants
///
/// The elements are `slots[(head + i) % slots.len()]` for `i < len`, all
/// `Some`; every other slot is `None`; `head < slots.len()` unless both
/// are 0.
pub(crate) struct Fifo<T> {
    slots: KVec<Option<T>>,
    head: usize,
    len: usize,
}

impl<T> Fifo<T> {
    pub(crate) const fn new() -> Self {
        Self {
            slots: KVec::new(),
            head: 0,
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The slot of the `i`-th element from the front; `i` is at most the
    /// capacity, and `head` is below it.
    fn slot(&self, i: usize) -> usize {
        let at = self.head + i;
        if at >= self.slots.len() {
            at - self.slots.len()
        } else {
            at
        }
    }

    /// The `i`-th element from the front.
    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len {
            return None;
        }
        self.slots[self.slot(i)].as_ref()
    }

    /// The elements from the front.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        (0..self.len).filter_map(move |i| self.get(i))
    }

    /// Adds `value` at the back.
    pub(crate) fn push_back(&mut self, value: T, flags: Flags) -> Result<(), AllocError> {
        if self.len == self.slots.len() {
            self.grow(flags)?;
        }
        let at = self.slot(self.len);
        self.slots[at] = Some(value);
        self.len += 1;
        Ok(())
    }

    /// Doubles the capacity (at least 8), moving the elements to the front
    /// of the new storage.
    fn grow(&mut self, flags: Flags) -> Result<(), AllocError> {
        let capacity = (self.slots.len() * 2).max(8);
        let mut slots = KVec::with_capacity(capacity, flags)?;
        for i in 0..self.len {
            let at = self.slot(i);
            slots.push(self.slots[at].take(), flags)?;
        }
        while slots.len() < capacity {
            slots.push(None, flags)?;
        }
        // INVARIANT: the elements moved, in order, to the first `len` slots.
        self.slots = slots;
        self.head = 0;
        Ok(())
    }

    /// Takes out the `i`-th element from the front: constant time for the
    /// front, otherwise the elements behind it move up.
    pub(crate) fn remove(&mut self, i: usize) -> Option<T> {
        if i >= self.len {
            return None;
        }
        let at = self.slot(i);
        let value = self.slots[at].take();
        if i == 0 {
            self.head = self.slot(1);
        } else {
            for j in i..self.len - 1 {
                let (to, from) = (self.slot(j), self.slot(j + 1));
                self.slots[to] = self.slots[from].take();
            }
        }
        self.len -= 1;
        value
    }
}

#[cfg(tt_kunit)]
#[path = "../tests/kunit/fifo_tests.rs"]
mod kunit;
