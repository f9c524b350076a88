// SPDX-License-Identifier: GPL-2.0

//! PCI binding: one `/dev/tenstorrent/N` per bound card.

use crate::{
    bars::Bars,
    card::{
        Card,
        PciIdentity, //
    },
    chip::{
        Family,
        Layout,
        GRAYSKULL_DEVICE_ID,
        VENDOR_TENSTORRENT, //
    },
    dma::{
        CardDma,
        DmaLimits, //
    },
    mapping::{
        self,
        CardMemory, //
    },
    power::CardPower,
    registry::Ordinal,
    reset::CardFunction,
    rust_ext::{
        chrdev::CharDevice,
        dma::set_dma_mask,
        hwmon::Registration,
        pci::{
            clear_master,
            EnabledDevice, //
        },
        pci_ids::PCI_IDS,
        reboot::{
            OnShutdown,
            ShutdownHook, //
        }, //
    }, //
    views::{
        debugfs::CardDebugfs,
        hwmon,
        procfs::CardProc,
        sysfs::CARD_GROUPS, //
    },
};
use kernel::{
    device::{
        Bound,
        Core, //
    },
    pci,
    prelude::*,
    str::CString,
    sync::Arc, //
};

// The driver binds the chips of src/chip/ through the C id table of
// rust/pci_ids_glue.c; the KUnit suite checks that the two list the same
// cards.
pub(crate) struct TenstorrentDriver;

/// A bound card. Dropping it (unbind, removal, module unload) wakes every
/// waiter with `ENODEV`, disables the card's outbound regions, removes the
/// node, disables the function (no more bus mastering), then frees the
/// ordinal; devres frees the DMA buffers after that. Files still open keep
/// the [`Card`] until they are closed.
pub(crate) struct BoundCard<'bound> {
    // Fields drop in declaration order; the ordinal goes last.
    /// Quiesces the card's DMA when the system restarts (kexec included),
    /// halts or powers off.
    _shutdown: ShutdownHook<CardShutdown<'bound>>,
    /// The card's sensors (src/views/hwmon.rs).
    _hwmon: Option<Registration<Card>>,
    _proc: CardProc,
    _debugfs: CardDebugfs,
    node: CharDevice<Card>,
    /// The card's interrupt vector, as tt-kmd allocates one (tools, and
    /// tt-kmd's own tests, expect MSI enabled on a bound card). No
    /// handler yet: nothing of the card interrupts the driver.
    _irq: Option<pci::IrqVectorRegistration<'bound>>,
    /// Dropped after `drop` quiesced the card's DMA and before devres frees
    /// its buffers: the function stops mastering the bus in between.
    _enabled: EnabledDevice<'bound>,
    ordinal: Ordinal,
}

/// What a card does before the system restarts (kexec included), halts or
/// powers off, as tt-kmd's `.shutdown`: its outbound regions disabled and
/// bus mastering cleared, so that no DMA of it reaches memory the next
/// kernel (kexec) or the firmware now owns.
struct CardShutdown<'bound> {
    card: Arc<Card>,
    pdev: &'bound pci::Device<Bound>,
}

impl OnShutdown for CardShutdown<'_> {
    fn on_shutdown(&self) {
        self.card.dma.quiesce(&self.card.memory);
        clear_master(self.pdev);
    }
}

impl Drop for BoundCard<'_> {
    fn drop(&mut self) {
        self.node.data().shut_down();
        pr_info!("/dev/tenstorrent/{} removed\n", self.ordinal.number());
    }
}

/// The PCI domain, from the device name `DDDD:BB:DD.F`: `pci_domain_nr()`
/// is an inline function the Rust bindings do not reach.
fn pci_domain(name: &CStr) -> u16 {
    let digits = name.to_bytes().iter().take_while(|&&c| c != b':');
    digits.fold(0u16, |domain, &c| {
        let digit = (c as char).to_digit(16).unwrap_or(0) as u16;
        domain.wrapping_mul(16).wrapping_add(digit)
    })
}

/// The TLB window layout of a card of chip `family`, whose BAR4 is
/// `bar4_len` bytes; a device of no chip the driver knows (bound through
/// `new_id`, e.g. the test VM's emulated devices) gets the layout the
/// module parameter `emulated_tlb_layout` (`emulated`) names.
fn tlb_layout(family: Option<Family>, bar4_len: u64, emulated: u32) -> Layout {
    match family {
        Some(family) => (family.chip().tlb_layout)(bar4_len),
        None if emulated == EMULATE_BLACKHOLE => Layout::blackhole(8),
        None => Layout::wormhole(),
    }
}

/// Values of the `emulated_tlb_layout` module parameter.
pub(crate) const EMULATE_WORMHOLE: u32 = 0;
pub(crate) const EMULATE_BLACKHOLE: u32 = 1;

impl pci::Driver for TenstorrentDriver {
    type IdInfo = ();
    type Data<'bound> = BoundCard<'bound>;

    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_IDS;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        let vendor_id = pdev.vendor_id().as_raw();
        let device_id = pdev.device_id();
        if vendor_id == VENDOR_TENSTORRENT && device_id == GRAYSKULL_DEVICE_ID {
            dev_err!(
                pdev,
                "Grayskull ({:04x}:{:04x}) is end-of-life and not supported by this driver\n",
                vendor_id,
                device_id
            );
            return Err(ENODEV);
        }

        let identity = PciIdentity {
            vendor_id,
            device_id,
            subsystem_vendor_id: pdev.subsystem_vendor_id(),
            subsystem_id: pdev.subsystem_device_id(),
            bus_dev_fn: pdev.dev_id(),
            domain: pci_domain(pdev.as_ref().name()),
        };
        let layout = tlb_layout(
            Family::of_pci_device(vendor_id, device_id),
            pdev.resource_len(4).unwrap_or(0),
            crate::module_parameters::emulated_tlb_layout.value(),
        );
        let enabled = EnabledDevice::new(pdev)?;
        // The addresses the chip reaches host memory at without an outbound
        // region (tt-kmd 2.10: 32 bits on Wormhole, 58 on Blackhole).
        let dma_capable = match set_dma_mask(pdev, layout.family.chip().dma_bits) {
            Ok(()) => true,
            Err(e) => {
                dev_warn!(pdev, "no DMA ({:?}): DMA buffers and pinning refused\n", e);
                false
            }
        };
        let irq = match pdev.alloc_irq_vectors(1, 1, pci::IrqTypes::all()) {
            Ok(irq) => Some(irq),
            Err(e) => {
                dev_warn!(pdev, "no interrupt vector ({:?})\n", e);
                None
            }
        };
        let dev: &kernel::device::Device<Core<'_>> = pdev.as_ref();
        let mib = |param: u32| {
            usize::try_from(param)
                .unwrap_or(usize::MAX)
                .saturating_mul(1 << 20)
        };
        let limits = DmaLimits {
            buffer_bytes: mib(crate::module_parameters::max_dma_buf_mb_per_card.value()),
            pinned_pages: mib(crate::module_parameters::max_pinned_mb_per_card.value())
                / kernel::page::PAGE_SIZE,
        };
        let dma = CardDma::new(dev, layout.family, dma_capable, limits)?;
        let function = CardFunction::new(pdev)?;
        let bars = Bars::map(pdev, mapping::kernel_bar_parts(&layout))?;
        let windows = layout.total();
        let memory = CardMemory::new(bars, windows)?;
        let power = CardPower::new(
            layout.family,
            crate::module_parameters::power_policy.value(),
            crate::module_parameters::idle_power_down_grace_ms.value(),
        );
        let ordinal = Ordinal::take()?;
        let card = Arc::pin_init(
            Card::new(
                ordinal.number(),
                identity,
                layout,
                memory,
                dma,
                function,
                power,
            )?,
            GFP_KERNEL,
        )?;
        // No file has a region yet: any enabled one is an earlier driver's.
        card.dma.disable_stale_regions(&card.memory);
        // Idle until a file votes for more (tt-kmd 2.10 does the same).
        if let Err(e) = card.power.probe(&card.firmware(), &|| card.kick_smc()) {
            dev_warn!(pdev, "power state not sent ({:?})\n", e);
        }
        // Before the class device is added: which telemetry attributes it
        // has depends on what the firmware publishes.
        if let Err(e) = card.telemetry.probe(&card.firmware()) {
            dev_warn!(pdev, "no telemetry ({:?})\n", e);
        }
        let name = CString::try_from_fmt(fmt!("tenstorrent/{}", ordinal.number()))?;
        let node = CharDevice::new(
            ordinal.region(),
            ordinal.number(),
            pdev.as_ref(),
            &name,
            &CARD_GROUPS,
            card.clone(),
        )?;
        let hwmon = match hwmon::register(&card, pdev.as_ref()) {
            Ok(hwmon) => Some(hwmon),
            Err(e) => {
                dev_warn!(pdev, "no hwmon device ({:?})\n", e);
                None
            }
        };
        // Not optional, unlike hwmon: without it a reboot or kexec leaves
        // the card's DMA running into memory the next kernel reuses.
        let shutdown = ShutdownHook::new(CardShutdown {
            card: card.clone(),
            pdev,
        })?;
        let proc = CardProc::new(ordinal.proc_root(), &card)?;
        let debugfs = CardDebugfs::new(ordinal.debug_root(), &card)?;
        dev_info!(
            pdev,
            "{:04x}:{:04x} bound as /dev/tenstorrent/{} (TLB windows: {:?} layout)\n",
            vendor_id,
            device_id,
            ordinal.number(),
            layout.family
        );
        Ok(BoundCard {
            _shutdown: shutdown,
            _hwmon: hwmon,
            _proc: proc,
            _debugfs: debugfs,
            node,
            _irq: irq,
            _enabled: enabled,
            ordinal,
        })
    }
}

#[cfg(CONFIG_KUNIT)]
#[path = "../tests/kunit/driver_tests.rs"]
mod kunit;
