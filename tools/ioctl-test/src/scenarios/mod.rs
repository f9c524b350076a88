//! Every scenario, in run order (the ones that unbind cards last).

mod card;
mod client;
mod compat;
mod info;
mod lifecycle;
mod locks;
mod reliability;
mod sets;
mod sharing;
mod stress;
mod tlb;
mod validation;
mod view;

use crate::harness::Scenario;

macro_rules! scenarios {
    ($($name:literal => $f:path $(, $t:literal)?;)*) => {
        &[$(Scenario { name: $name, run: $f, timeout_s: scenarios!(@t $($t)?) }),*]
    };
    (@t) => { 60 };
    (@t $t:literal) => { $t };
}

/// All scenarios.
pub const ALL: &[Scenario] = scenarios! {
    "card/ids_bars_and_capabilities" => card::ids_bars_and_capabilities;
    "card/control_channel" => card::control_channel;
    "card/tile_memory_through_windows" => card::tile_memory_through_windows;
    "card/arc_message" => card::arc_message;
    "card/vanish_reads_all_ones" => card::vanish_reads_all_ones;
    "info/nodes_and_sysfs" => info::nodes_and_sysfs;
    "info/driver_info_version" => info::driver_info_version;
    "info/device_info_values" => info::device_info_values;
    "info/output_size_rule" => info::output_size_rule;
    "info/in_at_end_of_mapping" => info::in_at_end_of_mapping;
    "info/unknown_ioctls_enotty" => info::unknown_ioctls_enotty;
    "info/bad_pointers_efault" => info::bad_pointers_efault;
    "compat/lock_ctl_table" => compat::lock_ctl_table;
    "compat/all_64_locks" => compat::all_64_locks;
    "compat/lock_ctl_einval" => compat::lock_ctl_einval;
    "compat/lock_ctl_output_size" => compat::lock_ctl_output_size;
    "compat/lock_ctl_reserved_ignored" => compat::lock_ctl_reserved_ignored;
    "compat/lock_ctl_blocking_same_file" => compat::lock_ctl_blocking_same_file;
    "locks/woken_by_release" => locks::woken_by_release;
    "locks/woken_by_holder_exit" => locks::woken_by_holder_exit;
    "locks/sigkill_holder_fifo" => locks::sigkill_holder_fifo;
    "locks/eintr_without_restart" => locks::eintr_without_restart;
    "locks/sa_restart_lock_ctl" => locks::sa_restart_lock_ctl;
    "locks/sigstop_sigcont_waiter" => locks::sigstop_sigcont_waiter;
    "locks/deadlines_and_nonblock" => locks::deadlines_and_nonblock;
    "locks/edeadlk_and_eperm" => locks::edeadlk_and_eperm;
    "locks/two_opens_conflict" => locks::two_opens_conflict;
    "locks/one_waiter_woken_per_release" => locks::one_waiter_woken_per_release;
    "locks/query_fields" => locks::query_fields;
    "locks/close_releases_synchronously" => locks::close_releases_synchronously;
    "sets/all_or_nothing" => sets::all_or_nothing;
    "sets/arrival_order_no_barging" => sets::arrival_order_no_barging;
    "sharing/fork_and_dup_share_the_owner" => sharing::fork_and_dup_share_the_owner;
    "sharing/scm_rights_passes_the_owner" => sharing::scm_rights_passes_the_owner;
    "validation/einval_new_commands" => validation::einval_new_commands;
    "validation/argsz_larger_than_struct" => validation::argsz_larger_than_struct;
    "validation/wrong_size_bits_enotty" => validation::wrong_size_bits_enotty;
    "validation/efault_on_write_back_undoes_the_grant" => validation::efault_on_write_back_undoes_the_grant;
    "stress/mutual_exclusion" => stress::mutual_exclusion, 180;
    "stress/overlapping_sets" => stress::overlapping_sets, 180;
    "tlb/layout_counts_wormhole" => tlb::layout_counts_wormhole;
    "tlb/errors_and_permissions" => tlb::errors_and_permissions;
    "tlb/enomem_vs_blocking" => tlb::enomem_vs_blocking;
    "tlb/fifo_and_release_on_kill" => tlb::fifo_and_release_on_kill;
    "tlb/unbind_wakes_tlb_waiters" => tlb::unbind_wakes_tlb_waiters;
    "card/function_level_reset" => card::function_level_reset;
    "card/secondary_bus_reset" => card::secondary_bus_reset;
    "client/guard_drop_releases" => client::guard_drop_releases;
    "client/owner_died_on_guard" => client::owner_died_on_guard;
    "client/busy_and_timeout" => client::busy_and_timeout;
    "client/lock_many_all_or_nothing" => client::lock_many_all_or_nothing;
    "client/interrupted" => client::interrupted;
    "view/holder_then_owner_died" => view::holder_then_owner_died;
    "view/waiters_count_and_order" => view::waiters_count_and_order;
    "view/pid_namespace_translation" => view::pid_namespace_translation;
    "view/counters_move" => view::counters_move;
    "view/concurrent_readers_during_stress" => view::concurrent_readers_during_stress, 300;
    "view/tt_locks_cli" => view::tt_locks_cli, 120;
    "reliability/corpus_replay" => reliability::corpus_replay, 120;
    "reliability/fuzz_ioctls" => reliability::fuzz_ioctls, 900;
    "reliability/crash_storm" => reliability::crash_storm, 900;
    "reliability/signal_storm" => reliability::signal_storm, 900;
    "reliability/scale_waiters_one_lock" => reliability::thousand_waiters_one_lock, 900;
    "reliability/scale_waiters_64_locks" => reliability::thousand_waiters_64_locks, 900;
    "reliability/scale_open_files" => reliability::thousands_of_files, 900;
    "reliability/unbind_rebind_under_load" => reliability::unbind_rebind_under_load, 900;
    "reliability/module_reload" => reliability::module_reload, 900;
    "lifecycle/module_unload_refused_while_open" => lifecycle::module_unload_refused_while_open;
    "lifecycle/unbind_with_open_file" => lifecycle::unbind_with_open_file;
    "lifecycle/unbind_wakes_waiters" => lifecycle::unbind_wakes_waiters;
    "lifecycle/tlb_layout_blackhole" => tlb::layout_blackhole;
};
