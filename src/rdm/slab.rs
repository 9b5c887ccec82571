//! A table of records named by handles that are never reused while they
//! could still be presented: a slot index in the low 32 bits and the slot's
//! generation in the high 32 bits. Lookups are an index and a compare, not a
//! hash (the posted receives of an RDM endpoint are looked up once or twice
//! per message).
//!
//! A handle whose record was removed stays invalid even after its slot holds
//! a new record (the generation differs), so a late reference (a rendezvous
//! read that completes after its receive was cancelled) finds nothing rather
//! than another receive. Handle 0 is never handed out.

#[derive(Debug)]
struct Slot<T> {
    gen: u32,
    val: Option<T>,
}

#[derive(Debug)]
pub struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab { slots: Vec::new(), free: Vec::new(), len: 0 }
    }
}

impl<T> Slab<T> {
    fn split(h: u64) -> (usize, u32) {
        ((h & 0xffff_ffff) as usize, (h >> 32) as u32)
    }

    /// Stores `v`; its handle (never 0). Inlined (one caller per record
    /// type): the record is built in its slot, not copied into a call.
    #[inline(always)]
    pub fn insert(&mut self, v: T) -> u64 {
        self.len += 1;
        let i = match self.free.pop() {
            Some(i) => i as usize,
            None => {
                // Generations start at 1: handle 0 is never valid.
                self.slots.push(Slot { gen: 0, val: None });
                self.slots.len() - 1
            }
        };
        let s = &mut self.slots[i];
        s.gen = s.gen.wrapping_add(1).max(1);
        s.val = Some(v);
        ((s.gen as u64) << 32) | i as u64
    }

    #[inline]
    pub fn get(&self, h: u64) -> Option<&T> {
        let (i, g) = Self::split(h);
        self.slots.get(i).filter(|s| s.gen == g).and_then(|s| s.val.as_ref())
    }

    /// The slot of `h` if it holds a record.
    fn live(&mut self, h: u64) -> Option<(usize, &mut Slot<T>)> {
        let (i, g) = Self::split(h);
        self.slots.get_mut(i).filter(|s| s.gen == g && s.val.is_some()).map(|s| (i, s))
    }

    /// Slot `i`, emptied, is free for the next insert.
    fn vacate(&mut self, i: usize) {
        self.free.push(i as u32);
        self.len -= 1;
    }

    pub fn remove(&mut self, h: u64) -> Option<T> {
        let (i, s) = self.live(h)?;
        let v = s.val.take();
        self.vacate(i);
        v
    }

    /// Removes the record of `h` without moving it out (`remove` returns it
    /// by value, a copy of the whole record); false when `h` names none.
    #[inline]
    pub fn discard(&mut self, h: u64) -> bool {
        let Some((i, s)) = self.live(h) else { return false };
        s.val = None;
        self.vacate(i);
        true
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn clear(&mut self) {
        self.slots.clear();
        self.free.clear();
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discard_drops_in_place_and_only_live_handles() {
        let mut s: Slab<String> = Slab::default();
        let a = s.insert("a".into());
        let b = s.insert("b".into());
        assert!(s.discard(a), "discard removes a live record");
        assert_eq!(s.get(a), None);
        assert!(!s.discard(a), "a discarded handle discards nothing");
        assert_eq!(s.remove(a), None);
        assert_eq!(s.len(), 1);
        assert_eq!(s.get(b).map(String::as_str), Some("b"), "the other record is untouched");
        // The slot comes back under a new generation: the old handle stays dead.
        let c = s.insert("c".into());
        assert_eq!(c & 0xffff_ffff, a & 0xffff_ffff, "slot reused");
        assert!(!s.discard(a));
        assert_eq!(s.get(c).map(String::as_str), Some("c"));
        assert!(!s.discard(0), "handle 0 is never valid");
    }

    #[test]
    fn handles_are_unique_and_stale_ones_find_nothing() {
        let mut s: Slab<u32> = Slab::default();
        let a = s.insert(1);
        let b = s.insert(2);
        assert_ne!(a, 0);
        assert_ne!(a, b);
        assert_eq!(s.get(a), Some(&1));
        assert_eq!(s.remove(a), Some(1));
        assert_eq!(s.get(a), None);
        assert_eq!(s.remove(a), None);
        // The slot is reused under a new generation: the old handle stays dead.
        let c = s.insert(3);
        assert_eq!(c & 0xffff_ffff, a & 0xffff_ffff, "slot reused");
        assert_ne!(c, a);
        assert_eq!(s.get(a), None);
        assert_eq!(s.get(c), Some(&3));
        assert_eq!(s.get(0), None);
        assert_eq!(s.get(u64::MAX), None);
        assert_eq!(s.len(), 2);
        s.clear();
        assert!(s.is_empty());
        assert_eq!(s.get(b), None);
    }

    #[test]
    fn it_agrees_with_a_map_under_random_use() {
        use std::collections::HashMap;
        let mut s: Slab<u64> = Slab::default();
        let mut m: HashMap<u64, u64> = HashMap::new();
        let mut dead: Vec<u64> = Vec::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for n in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x % 3 != 0 || m.is_empty() {
                let h = s.insert(n);
                assert!(m.insert(h, n).is_none(), "handle {h:#x} handed out twice");
            } else {
                let h = *m.keys().nth((x as usize >> 8) % m.len()).expect("non-empty");
                assert_eq!(s.remove(h), m.remove(&h));
                dead.push(h);
            }
            assert_eq!(s.len(), m.len());
        }
        for (h, v) in &m {
            assert_eq!(s.get(*h), Some(v));
        }
        for h in dead {
            assert_eq!(s.get(h), None);
        }
    }
}
