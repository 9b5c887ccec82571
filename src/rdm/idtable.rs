//! A table that hands out its own `u32` ids and finds an entry by its id
//! with one index and one compare: no hashing on the message path.
//!
//! An id is a slot number (the low `SLOT_BITS` bits) and that slot's
//! generation (the bits above), which moves on every time the slot is freed:
//! an id of an entry that is gone (a work-request id or rdma-cm token of a
//! connection torn down meanwhile) does not find the slot's next entry.
//! Freed slots are reused oldest first, so the same slot comes back (and its
//! generation moves) only after every other free slot was used. Id 0 is never
//! handed out (slot 0 starts at generation 1).

/// Bits of an id that name the slot: at most 2^20 entries at once.
const SLOT_BITS: u32 = 20;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;

#[derive(Debug)]
pub struct IdTable<V> {
    /// Per slot: the id it holds or will hand out next, and its entry.
    slots: Vec<(u32, Option<V>)>,
    /// Free slots, oldest first.
    free: std::collections::VecDeque<u32>,
    len: usize,
}

impl<V> Default for IdTable<V> {
    fn default() -> Self {
        IdTable { slots: Vec::new(), free: std::collections::VecDeque::new(), len: 0 }
    }
}

impl<V> IdTable<V> {
    /// The id the next `insert_new` hands out.
    pub fn next_id(&self) -> u32 {
        match self.free.front() {
            Some(&s) => self.slots[s as usize].0,
            None => {
                let s = self.slots.len() as u32;
                assert!(s <= SLOT_MASK, "more than 2^{SLOT_BITS} entries");
                // Slot 0's first id is not 0 (reserved for "none").
                s | if s == 0 { 1 << SLOT_BITS } else { 0 }
            }
        }
    }

    /// Adds `v` under `next_id()`; returns that id.
    pub fn insert_new(&mut self, v: V) -> u32 {
        let id = self.next_id();
        match self.free.pop_front() {
            Some(s) => self.slots[s as usize].1 = Some(v),
            None => self.slots.push((id, Some(v))),
        }
        self.len += 1;
        id
    }

    #[inline(always)]
    pub fn get(&self, id: &u32) -> Option<&V> {
        match self.slots.get((id & SLOT_MASK) as usize) {
            Some((sid, Some(v))) if sid == id => Some(v),
            _ => None,
        }
    }

    #[inline(always)]
    pub fn get_mut(&mut self, id: &u32) -> Option<&mut V> {
        match self.slots.get_mut((id & SLOT_MASK) as usize) {
            Some((sid, Some(v))) if sid == id => Some(v),
            _ => None,
        }
    }

    pub fn contains_key(&self, id: &u32) -> bool {
        self.get(id).is_some()
    }

    pub fn remove(&mut self, id: &u32) -> Option<V> {
        let s = id & SLOT_MASK;
        let slot = self.slots.get_mut(s as usize)?;
        if slot.0 != *id || slot.1.is_none() {
            return None;
        }
        let v = slot.1.take();
        // The slot's next id: the next generation (never 0).
        let mut next = slot.0.wrapping_add(1 << SLOT_BITS);
        if next == 0 {
            next = 1 << SLOT_BITS;
        }
        slot.0 = next;
        self.free.push_back(s);
        self.len -= 1;
        v
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = (&u32, &V)> {
        self.slots.iter().filter_map(|(id, v)| Some((id, v.as_ref()?)))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&u32, &mut V)> {
        self.slots.iter_mut().filter_map(|(id, v)| Some((&*id, v.as_mut()?)))
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.slots.iter().filter_map(|(_, v)| v.as_ref())
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.slots.iter_mut().filter_map(|(_, v)| v.as_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_find_their_entry_and_never_a_later_one() {
        let mut t: IdTable<&str> = IdTable::default();
        let a = t.insert_new("a");
        assert_ne!(a, 0, "id 0 is never handed out");
        let b = t.insert_new("b");
        assert_ne!(a, b);
        assert_eq!(t.get(&a), Some(&"a"));
        assert_eq!(t.get(&b), Some(&"b"));
        assert_eq!(t.len(), 2);
        assert_eq!(t.remove(&a), Some("a"));
        assert_eq!(t.get(&a), None);
        assert_eq!(t.remove(&a), None, "removed once");
        let c = t.next_id();
        assert_eq!(t.insert_new("c"), c);
        assert_ne!(c, a, "the slot's next entry has another id");
        assert_eq!(c & SLOT_MASK, a & SLOT_MASK, "in the same slot");
        assert_eq!(t.get(&a), None, "an old id does not find the new entry");
        assert_eq!(t.get(&c), Some(&"c"));
        assert_eq!(t.get(&0), None);
        assert_eq!(t.get(&u32::MAX), None);
        let mut ids: Vec<u32> = t.iter().map(|(k, _)| *k).collect();
        ids.sort();
        let mut want = vec![b, c];
        want.sort();
        assert_eq!(ids, want);
    }

    #[test]
    fn freed_slots_are_reused_oldest_first() {
        let mut t: IdTable<u32> = IdTable::default();
        let ids: Vec<u32> = (0..4).map(|i| t.insert_new(i)).collect();
        t.remove(&ids[2]);
        t.remove(&ids[0]);
        let x = t.insert_new(9);
        assert_eq!(x & SLOT_MASK, ids[2] & SLOT_MASK, "the slot freed first comes back first");
        let y = t.insert_new(10);
        assert_eq!(y & SLOT_MASK, ids[0] & SLOT_MASK);
        let z = t.insert_new(11);
        assert_eq!(z & SLOT_MASK, 4, "then a new slot");
        assert_eq!(t.len(), 5);
        assert_eq!(t.values().copied().sum::<u32>(), 1 + 3 + 9 + 10 + 11);
    }

    #[test]
    fn a_slot_reused_many_times_never_repeats_a_live_id_or_zero() {
        let mut t: IdTable<()> = IdTable::default();
        let mut last = t.insert_new(());
        for _ in 0..(1u32 << (32 - SLOT_BITS)) + 3 {
            t.remove(&last);
            let n = t.insert_new(());
            assert_ne!(n, 0);
            assert_ne!(n, last);
            assert!(t.get(&last).is_none());
            last = n;
        }
    }
}
