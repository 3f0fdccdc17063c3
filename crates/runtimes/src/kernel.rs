//! The kernel: the frames that say which wait a thread is in, the syscalls that say it when
//! no kernel frame was walked, and the recorder's own uprobe machinery.

use crate::{Frames, Kind, Runtime};

pub struct Kernel;

/// The mapping of the kernel's uprobe pages (the out-of-line single-step slots), as
/// /proc/PID/maps and a stack walk name it.
pub const UPROBES: &str = "[uprobes]";

impl Runtime for Kernel {
    fn name(&self) -> &'static str {
        "kernel"
    }

    fn frames(&self) -> &'static Frames {
        &FRAMES
    }
}

const FRAMES: Frames = Frames {
    kernel_waits: &[
        // Page faults first: a fault can sleep on a page lock or on I/O.
        ("exc_page_fault", Kind::Fault),
        ("do_user_addr_fault", Kind::Fault),
        ("handle_mm_fault", Kind::Fault),
        // Event waits: the epoll/poll/select wait (its timeout is an hrtimer too).
        ("do_epoll_wait", Kind::Idle),
        ("ep_poll", Kind::Idle),
        ("do_sys_poll", Kind::Idle),
        ("do_select", Kind::Idle),
        ("core_sys_select", Kind::Idle),
        ("inet_csk_accept", Kind::Idle),
        ("unix_accept", Kind::Idle),
        // Waiting for a signal (nginx's master in sigsuspend): waiting to be told to work.
        ("sigsuspend", Kind::Idle),
        ("do_sigtimedwait", Kind::Idle),
        // Kernel locks.
        ("__mutex_lock", Kind::Lock),
        ("rwsem_down_read_slowpath", Kind::Lock),
        ("rwsem_down_write_slowpath", Kind::Lock),
        ("rt_mutex_slowlock", Kind::Lock),
        ("percpu_rwsem_wait", Kind::Lock),
        // Sockets.
        ("sk_wait_data", Kind::Net),
        ("sk_stream_wait_memory", Kind::Net),
        ("sk_stream_wait_connect", Kind::Net),
        ("inet_wait_for_connect", Kind::Net),
        ("__skb_wait_for_more_packets", Kind::Net),
        ("__skb_recv_datagram", Kind::Net),
        ("sock_alloc_send_pskb", Kind::Net),
        ("unix_stream_read_generic", Kind::Net),
        ("unix_dgram_recvmsg", Kind::Net),
        ("__skb_recv_udp", Kind::Net),
        ("udp_recvmsg", Kind::Net),
        ("tcp_recvmsg", Kind::Net),
        ("tcp_sendmsg", Kind::Net),
        ("sock_recvmsg", Kind::Net),
        ("sock_sendmsg", Kind::Net),
        // Block I/O.
        ("io_schedule", Kind::Io),
        ("jbd2_log_wait_commit", Kind::Io),
        ("file_write_and_wait_range", Kind::Io),
        ("blkdev_issue_flush", Kind::Io),
        ("submit_bio_wait", Kind::Io),
        ("folio_wait_bit", Kind::Io),
        ("folio_wait_bit_common", Kind::Io),
        ("wait_on_page_bit", Kind::Io),
        ("vfs_fsync_range", Kind::Io),
        ("do_fsync", Kind::Io),
        // Pipes and children.
        ("pipe_read", Kind::Ipc),
        ("pipe_write", Kind::Ipc),
        // Their names since Linux 6.15.
        ("anon_pipe_read", Kind::Ipc),
        ("anon_pipe_write", Kind::Ipc),
        ("fifo_pipe_read", Kind::Ipc),
        ("fifo_pipe_write", Kind::Ipc),
        ("wait_for_partner", Kind::Ipc),
        ("do_wait", Kind::Ipc),
        // Timers.
        ("do_nanosleep", Kind::Sleep),
        ("hrtimer_nanosleep", Kind::Sleep),
        ("common_nsleep", Kind::Sleep),
        // Futexes: what for is in the user frames.
        ("futex_wait", Kind::Lock),
        ("futex_do_wait", Kind::Lock),
        ("__futex_wait", Kind::Lock),
        ("futex_wait_queue", Kind::Lock),
        ("futex_lock_pi", Kind::Lock),
    ],
    syscall_waits: &[
        ("epoll_wait", Kind::Idle),
        ("epoll_pwait", Kind::Idle),
        ("epoll_pwait2", Kind::Idle),
        ("poll", Kind::Idle),
        ("ppoll", Kind::Idle),
        ("select", Kind::Idle),
        ("pselect6", Kind::Idle),
        ("accept", Kind::Idle),
        ("accept4", Kind::Idle),
        ("nanosleep", Kind::Sleep),
        ("clock_nanosleep", Kind::Sleep),
        ("fsync", Kind::Io),
        ("fdatasync", Kind::Io),
        ("sync_file_range", Kind::Io),
        ("recvfrom", Kind::Net),
        ("recvmsg", Kind::Net),
        ("recvmmsg", Kind::Net),
        ("sendto", Kind::Net),
        ("sendmsg", Kind::Net),
        ("sendmmsg", Kind::Net),
        ("connect", Kind::Net),
        ("futex", Kind::Lock),
    ],
    // UDP's and the unix datagram socket's receive, down to its wait.
    datagram_receives: &[
        "udp_recvmsg",
        "udpv6_recvmsg",
        "__skb_recv_udp",
        "unix_dgram_recvmsg",
        "__skb_recv_datagram",
        "skb_recv_datagram",
        "__skb_wait_for_more_packets",
    ],
    // The single-step trap of a probed instruction, the return trampoline.
    probe_frames: &[
        UPROBES,
        "asm_exc_debug",
        "exc_debug_user",
        "asm_exc_int3",
        "uprobe_notify_resume",
        "arch_uprobe_post_xol",
        "uprobe_handle_trampoline",
        "__do_sys_uretprobe",
        "__x64_sys_uretprobe",
    ],
    ..Frames::NONE
};
