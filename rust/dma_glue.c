// SPDX-License-Identifier: GPL-2.0
/*
 * DMA for the Rust side of the tenstorrent module (rust/dma.rs).
 *
 * What Linux 7.3's Rust bindings cannot reach: page_to_pfn() and
 * for_each_sgtable_dma_sg() are macros, the FOLL_* flags an anonymous enum,
 * dma_set_seg_boundary() and the IOMMU domain type checks static inlines.
 * Charging a user's locked_vm needs current_user() (a macro), rlimit(),
 * get_uid() and the atomic_long operations (static inlines): a Rust
 * abstraction of `struct user_struct` (an ARef from current_user(), its
 * locked_vm as an atomic) and of the current task's rlimits would remove
 * tt_user_charge_locked_vm() and tt_user_uncharge_locked_vm().
 */

#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/dma-mapping.h>
#include <linux/iommu.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/sched/signal.h>
#include <linux/sched/user.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>

/* The condition under which struct user_struct has locked_vm. */
#if !(defined(CONFIG_NET) || defined(CONFIG_IO_URING) ||   \
      defined(CONFIG_VFIO_PCI_ZDEV_KVM) || IS_ENABLED(CONFIG_IOMMUFD) || \
      defined(CONFIG_SECRETMEM))
#error "pinned pages are charged to user_struct->locked_vm, absent in this configuration"
#endif

unsigned long tt_page_to_pfn(struct page *page);
bool tt_dma_is_translated(struct device *dev);
void tt_dma_set_limits(struct device *dev);
long tt_pin_user_pages(unsigned long start, unsigned long count, bool writable,
		       struct page **pages);
void tt_unpin_user_pages(struct page **pages, unsigned long count, bool dirty);
struct user_struct *tt_user_charge_locked_vm(unsigned long count);
void tt_user_uncharge_locked_vm(struct user_struct *user, unsigned long count);
struct sg_table *tt_dma_map_pages(struct device *dev, struct page **pages,
				  unsigned long count, bool to_device_only);
void tt_dma_unmap_pages(struct device *dev, struct sg_table *sgt,
			bool to_device_only);
bool tt_dma_contiguous(struct sg_table *sgt, u64 len, u64 *start);
int tt_dma_map_resource(struct device *dev, u64 phys, u64 len, u64 *addr);
void tt_dma_unmap_resource(struct device *dev, u64 addr, u64 len);

unsigned long tt_page_to_pfn(struct page *page)
{
	return page_to_pfn(page);
}

/*
 * Whether the device's DMA goes through an IOMMU that translates (not
 * absent, not an identity domain): then a DMA address is an IOVA, and
 * access rights (read-only mappings) are enforced.
 */
bool tt_dma_is_translated(struct device *dev)
{
	struct iommu_domain *domain = iommu_get_domain_for_dev(dev);

	return domain && domain->type != IOMMU_DOMAIN_IDENTITY;
}

/*
 * No segment limits of our own: the IOMMU layer may merge a pinned range
 * of scattered pages into one contiguous IOVA range.
 */
void tt_dma_set_limits(struct device *dev)
{
	dma_set_max_seg_size(dev, UINT_MAX);
	dma_set_seg_boundary(dev, ULONG_MAX);
}

/*
 * Pins `count` user pages from `start` for long-term DMA (the pages are
 * migrated out of movable zones first), writable unless asked otherwise.
 * Returns the number pinned or a negative errno.
 */
long tt_pin_user_pages(unsigned long start, unsigned long count, bool writable,
		       struct page **pages)
{
	unsigned int flags = FOLL_LONGTERM | (writable ? FOLL_WRITE : 0);

	if (count > INT_MAX)
		return -EINVAL;
	return pin_user_pages_fast(start, count, flags, pages);
}

void tt_unpin_user_pages(struct page **pages, unsigned long count, bool dirty)
{
	unpin_user_pages_dirty_lock(pages, count, dirty);
}

/*
 * Charges `count` pinned pages to the calling task's user (its locked_vm,
 * which io_uring and iommufd charge too: io_uring/rsrc.c
 * __io_account_mem(), iommufd's incr_user_locked_vm()), against the
 * caller's RLIMIT_MEMLOCK unless it has CAP_IPC_LOCK (as
 * account_locked_vm() bypasses the limit but still counts). Pins outlive
 * the pinning process (they belong to the file), so the user, not only its
 * mm, carries the charge: processes of one user sharing a file cannot pin
 * more than that limit together. Returns a reference on the user, to be
 * given back with the charge by tt_user_uncharge_locked_vm(), or
 * ERR_PTR(-ENOMEM).
 */
struct user_struct *tt_user_charge_locked_vm(unsigned long count)
{
	struct user_struct *user = current_user();
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	long cur = atomic_long_read(&user->locked_vm);
	unsigned long next;

	do {
		/* An overflow is past any limit; capable() only when needed. */
		if (check_add_overflow((unsigned long)cur, count, &next) ||
		    next > LONG_MAX ||
		    (next > limit && !capable(CAP_IPC_LOCK)))
			return ERR_PTR(-ENOMEM);
	} while (!atomic_long_try_cmpxchg(&user->locked_vm, &cur, next));
	return get_uid(user);
}

void tt_user_uncharge_locked_vm(struct user_struct *user, unsigned long count)
{
	WARN_ON_ONCE(atomic_long_sub_return(count, &user->locked_vm) < 0);
	free_uid(user);
}

/*
 * Maps `count` pinned pages for the device's DMA: bidirectional, or to
 * the device only. Returns the mapped table or an ERR_PTR.
 */
struct sg_table *tt_dma_map_pages(struct device *dev, struct page **pages,
				  unsigned long count, bool to_device_only)
{
	enum dma_data_direction dir =
		to_device_only ? DMA_TO_DEVICE : DMA_BIDIRECTIONAL;
	struct sg_table *sgt;
	int ret;

	if (count > UINT_MAX)
		return ERR_PTR(-EINVAL);
	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table_from_pages_segment(sgt, pages, count, 0,
						count << PAGE_SHIFT, UINT_MAX,
						GFP_KERNEL);
	if (ret)
		goto free;
	ret = dma_map_sgtable(dev, sgt, dir, 0);
	if (ret)
		goto free_table;
	return sgt;

free_table:
	sg_free_table(sgt);
free:
	kfree(sgt);
	return ERR_PTR(ret);
}

void tt_dma_unmap_pages(struct device *dev, struct sg_table *sgt,
			bool to_device_only)
{
	enum dma_data_direction dir =
		to_device_only ? DMA_TO_DEVICE : DMA_BIDIRECTIONAL;

	dma_unmap_sgtable(dev, sgt, dir, 0);
	sg_free_table(sgt);
	kfree(sgt);
}

/*
 * Whether the DMA segments of `sgt` are one range of `len` bytes; if so,
 * its first address is stored in `start`.
 */
bool tt_dma_contiguous(struct sg_table *sgt, u64 len, u64 *start)
{
	struct scatterlist *sg;
	dma_addr_t next = 0;
	u64 total = 0;
	unsigned int i;

	for_each_sgtable_dma_sg(sgt, sg, i) {
		if (i == 0)
			*start = sg_dma_address(sg);
		else if (sg_dma_address(sg) != next)
			return false;
		next = sg_dma_address(sg) + sg_dma_len(sg);
		total += sg_dma_len(sg);
	}
	return total == len;
}

/*
 * Maps `len` bytes of MMIO at `phys` (another device's BAR) for `dev`'s
 * DMA, bidirectionally; stores the bus address in `addr`.
 */
int tt_dma_map_resource(struct device *dev, u64 phys, u64 len, u64 *addr)
{
	dma_addr_t a = dma_map_resource(dev, phys, len, DMA_BIDIRECTIONAL, 0);

	if (dma_mapping_error(dev, a))
		return -ENOMEM;
	*addr = a;
	return 0;
}

void tt_dma_unmap_resource(struct device *dev, u64 addr, u64 len)
{
	dma_unmap_resource(dev, addr, len, DMA_BIDIRECTIONAL, 0);
}
