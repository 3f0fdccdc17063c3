//! The floor's object (`switchyard floor`): empty programs on the recording's attach points,
//! and a switch program's parts measured apart (one exact clock read, and the two ways of
//! finding a thread's entry). A recording loads
//! only its own object, so none of this, and none of its maps, is ever created by one.
#![no_std]
#![no_main]

mod floor;
mod object;
mod task;
