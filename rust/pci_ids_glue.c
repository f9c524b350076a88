// SPDX-License-Identifier: GPL-2.0
/*
 * The PCI ids the tenstorrent module binds (rust/pci_ids.rs): Linux 7.3's
 * kernel::pci::Vendor cannot be made for a vendor its list lacks, and
 * Tenstorrent is not in it.
 */

#include <linux/module.h>
#include <linux/pci.h>

#define PCI_VENDOR_ID_TENSTORRENT 0x1e52

extern const struct pci_device_id tt_pci_ids[];

/*
 * No driver_data: ids added at run time through sysfs new_id (the test
 * VM's emulated devices) are accepted only with a driver_data the table
 * has.
 */
const struct pci_device_id tt_pci_ids[] = {
	{ PCI_DEVICE(PCI_VENDOR_ID_TENSTORRENT, 0x401e) },	/* Wormhole */
	{ PCI_DEVICE(PCI_VENDOR_ID_TENSTORRENT, 0xb140) },	/* Blackhole */
	/* Grayskull: matched only to say clearly why it is not bound. */
	{ PCI_DEVICE(PCI_VENDOR_ID_TENSTORRENT, 0xfaca) },
	{ }
};
MODULE_DEVICE_TABLE(pci, tt_pci_ids);
