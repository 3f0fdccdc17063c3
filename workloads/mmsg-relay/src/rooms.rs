//! The member table: for each room, the addresses that joined it, in join order.

use std::{collections::HashMap, net::SocketAddrV4};

/// Members a room takes; a join past this is refused (and counted by the server).
pub const MAX_MEMBERS: usize = 64;

/// What a join did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoinOutcome {
    Joined,
    /// The address was already a member (a repeated join, e.g. after a lost ack).
    AlreadyMember,
    RoomFull,
}

#[derive(Clone, Debug, Default)]
pub struct Rooms {
    rooms: HashMap<u32, Vec<SocketAddrV4>>,
}

impl Rooms {
    pub fn join(&mut self, room: u32, addr: SocketAddrV4) -> JoinOutcome {
        let members = self.rooms.entry(room).or_default();
        if members.contains(&addr) {
            JoinOutcome::AlreadyMember
        } else if members.len() >= MAX_MEMBERS {
            JoinOutcome::RoomFull
        } else {
            members.push(addr);
            JoinOutcome::Joined
        }
    }

    /// The members of `room` (empty for a room nobody joined).
    pub fn members(&self, room: u32) -> &[SocketAddrV4] {
        self.rooms.get(&room).map_or(&[], Vec::as_slice)
    }

    /// Rooms with at least one member.
    pub fn room_count(&self) -> usize {
        self.rooms.values().filter(|m| !m.is_empty()).count()
    }

    pub fn member_count(&self) -> usize {
        self.rooms.values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn addr(port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)
    }

    #[test]
    fn joins_are_per_room_and_idempotent() {
        let mut r = Rooms::default();
        assert_eq!(r.join(1, addr(10)), JoinOutcome::Joined);
        assert_eq!(r.join(1, addr(11)), JoinOutcome::Joined);
        assert_eq!(r.join(1, addr(10)), JoinOutcome::AlreadyMember);
        assert_eq!(r.join(2, addr(10)), JoinOutcome::Joined);
        assert_eq!(r.members(1), [addr(10), addr(11)]);
        assert_eq!(r.members(2), [addr(10)]);
        assert!(r.members(3).is_empty());
        assert_eq!((r.room_count(), r.member_count()), (2, 3));
    }

    #[test]
    fn a_full_room_refuses() {
        let mut r = Rooms::default();
        for port in 0..MAX_MEMBERS as u16 {
            assert_eq!(r.join(0, addr(port)), JoinOutcome::Joined);
        }
        assert_eq!(r.join(0, addr(9999)), JoinOutcome::RoomFull);
        assert_eq!(r.join(0, addr(0)), JoinOutcome::AlreadyMember);
        assert_eq!(r.members(0).len(), MAX_MEMBERS);
    }
}
