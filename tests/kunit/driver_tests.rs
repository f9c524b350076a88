// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of the PCI binding's decisions, which the test VM's emulated
//! devices cannot reach: Grayskull's refusal, the window layout of real
//! Wormhole and Blackhole cards, the PCI domain.
//!
//! Built only when the harness asks for the suites (`TT_KUNIT=y`, see
//! `Kbuild`): `src/driver.rs` declares this module under `CONFIG_KUNIT`,
//! which every module built against a KUnit kernel would otherwise get.
#![cfg(tt_kunit)]

use super::*;

#[kunit_tests(tenstorrent_driver)]
mod tests {
    use super::*;

    #[test]
    fn chips_from_ids() {
        assert_eq!(GRAYSKULL_DEVICE_ID, 0xfaca);
        assert_eq!(Family::of_pci_device(0x1e52, 0xfaca), None);
        assert_eq!(
            Family::of_pci_device(0x1e52, 0x401e),
            Some(Family::Wormhole)
        );
        assert_eq!(
            Family::of_pci_device(0x1e52, 0xb140),
            Some(Family::Blackhole)
        );
        assert_eq!(Family::of_pci_device(0x1e52, 0x1234), None);
        assert_eq!(Family::of_pci_device(0x1234, 0x401e), None);
    }

    /// The C id table (rust/pci_ids_glue.c) binds exactly the chips of
    /// src/chip/ and Grayskull, without driver data (for sysfs `new_id`).
    #[test]
    fn id_table_lists_the_known_chips() {
        let entries = PCI_IDS.entries();
        let listed = |device_id: u16| {
            entries.iter().any(|id| {
                id.vendor == u32::from(VENDOR_TENSTORRENT) && id.device == u32::from(device_id)
            })
        };
        assert_eq!(entries.len(), Family::ALL.len() + 1);
        for family in Family::ALL {
            assert!(listed(family.chip().pci_device_id));
        }
        assert!(listed(GRAYSKULL_DEVICE_ID));
        assert!(entries.iter().all(|id| id.driver_data == 0));
    }

    /// rust/device.rs relies on the layout of `kernel::device::Device`:
    /// the pointer it takes from one is the `struct device` the public API
    /// of that `Device` reads.
    #[test]
    fn device_ptr_is_the_struct_device() -> Result {
        let faux = kernel::faux::Registration::new(c"tenstorrent-kunit", None)?;
        let faux: &kernel::faux::Device<Bound> = faux.as_ref();
        let dev: &kernel::device::Device<Bound> = faux.as_ref();
        assert!(crate::rust_ext::device::device_ptr_is_the_device(dev));
        Ok(())
    }

    #[test]
    fn layouts_of_real_and_emulated_cards() {
        let wormhole = tlb_layout(Some(Family::Wormhole), 0, EMULATE_BLACKHOLE);
        assert_eq!(wormhole.family, Family::Wormhole);
        assert_eq!(wormhole.classes().len(), 3);
        // A full Blackhole card has 32 GiB of BAR4: eight 4 GiB windows.
        let blackhole = tlb_layout(Some(Family::Blackhole), 32 << 30, EMULATE_WORMHOLE);
        assert_eq!(blackhole.family, Family::Blackhole);
        assert_eq!(blackhole.classes()[1].total, 8);
        let smaller = tlb_layout(Some(Family::Blackhole), 8 << 30, EMULATE_WORMHOLE);
        assert_eq!(smaller.classes()[1].total, 2);
        assert_eq!(
            tlb_layout(None, 0, EMULATE_BLACKHOLE).family,
            Family::Blackhole
        );
        assert_eq!(
            tlb_layout(None, 0, EMULATE_WORMHOLE).family,
            Family::Wormhole
        );
    }

    #[test]
    fn domain_from_device_name() {
        assert_eq!(pci_domain(c"0000:00:02.0"), 0);
        assert_eq!(pci_domain(c"0001:3b:00.0"), 1);
        assert_eq!(pci_domain(c"abcd:00:00.0"), 0xabcd);
    }
}
