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
use crate::chip::Family;

#[kunit_tests(tenstorrent_driver)]
mod tests {
    use super::*;

    #[test]
    fn models_from_ids() {
        assert_eq!(model(0x1e52, 0xfaca), Model::Grayskull);
        assert_eq!(model(0x1e52, 0x401e), Model::Wormhole);
        assert_eq!(model(0x1e52, 0xb140), Model::Blackhole);
        assert_eq!(model(0x1e52, 0x1234), Model::Other);
        assert_eq!(model(0x1234, 0x401e), Model::Other);
    }

    /// The C id table (rust/pci_ids_glue.c) binds exactly the cards
    /// `model` knows, without driver data (for sysfs `new_id`).
    #[test]
    fn id_table_lists_the_known_models() {
        let entries = PCI_IDS.entries();
        let model_of = |id: &kernel::bindings::pci_device_id| match (
            u16::try_from(id.vendor),
            u16::try_from(id.device),
        ) {
            (Ok(vendor), Ok(device)) => model(vendor, device),
            _ => Model::Other,
        };
        assert_eq!(entries.len(), 3);
        for wanted in [Model::Grayskull, Model::Wormhole, Model::Blackhole] {
            assert!(entries.iter().any(|id| model_of(id) == wanted));
        }
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
        let wormhole = tlb_layout(Model::Wormhole, 0, EMULATE_BLACKHOLE);
        assert_eq!(wormhole.family, Family::Wormhole);
        assert_eq!(wormhole.classes().len(), 3);
        // A full Blackhole card has 32 GiB of BAR4: eight 4 GiB windows.
        let blackhole = tlb_layout(Model::Blackhole, 32 << 30, EMULATE_WORMHOLE);
        assert_eq!(blackhole.family, Family::Blackhole);
        assert_eq!(blackhole.classes()[1].total, 8);
        let smaller = tlb_layout(Model::Blackhole, 8 << 30, EMULATE_WORMHOLE);
        assert_eq!(smaller.classes()[1].total, 2);
        assert_eq!(
            tlb_layout(Model::Other, 0, EMULATE_BLACKHOLE).family,
            Family::Blackhole
        );
        assert_eq!(
            tlb_layout(Model::Other, 0, EMULATE_WORMHOLE).family,
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
