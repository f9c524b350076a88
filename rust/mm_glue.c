// SPDX-License-Identifier: GPL-2.0
/*
 * Memory mappings for the Rust side of the tenstorrent module (rust/mm.rs).
 *
 * What Linux 7.3's Rust bindings cannot reach: the static inlines that set a
 * VMA's flags and page protection (vm_flags_set(), pgprot_device(),
 * pgprot_writecombine() on some architectures), and a pseudo filesystem
 * whose inodes give each card an address_space of its own, as VFIO does
 * for its devices (vfio_fs_type): every open file of a card, whatever
 * device node it was opened through, shares that address_space, so that
 * unmap_mapping_range() on it reaches every mapping of the card.
 */

#include <linux/fs.h>
#include <linux/fs_context.h>
#include <linux/io.h>
#include <linux/mm.h>
#include <linux/mount.h>
#include <linux/pseudo_fs.h>

/* "ttmm" */
#define TT_MAPPING_MAGIC 0x74746d6d

void tt_vma_set_io_pfnmap(struct vm_area_struct *vma, int caching);
int tt_io_reserve_memtype_wc(resource_size_t start, resource_size_t size);
void tt_io_free_memtype_wc(resource_size_t start, resource_size_t size);
struct inode *tt_mapping_inode_new(void);
void tt_mapping_inode_put(struct inode *inode);

/* rust/mm.rs `Caching`. */
enum tt_caching {
	TT_UNCACHED = 0,
	TT_WRITE_COMBINED = 1,
	TT_CACHED = 2,
};

/*
 * Makes `vma` a mapping of memory whose pages are inserted at fault time:
 * VM_IO | VM_PFNMAP, never copied on fork, never expanded by mremap,
 * never dumped, and mapped uncached (pgprot_device), write-combined, or
 * cached (DMA buffers in RAM, on cache-coherent platforms).
 */
void tt_vma_set_io_pfnmap(struct vm_area_struct *vma, int caching)
{
	vm_flags_set(vma, VM_IO | VM_PFNMAP | VM_DONTCOPY | VM_DONTEXPAND |
			  VM_DONTDUMP);
	if (caching == TT_WRITE_COMBINED)
		vma->vm_page_prot = pgprot_writecombine(vma->vm_page_prot);
	else if (caching == TT_UNCACHED)
		vma->vm_page_prot = pgprot_device(vma->vm_page_prot);
}

/*
 * Reserves (and frees) the write-combining memory type for a range of
 * device memory: on x86 with PAT, pages inserted at fault time get the
 * type reserved for their range, not the one the VMA asked for. Not a
 * static inline, but bindgen does not see the x86 declaration.
 */
int tt_io_reserve_memtype_wc(resource_size_t start, resource_size_t size)
{
	return arch_io_reserve_memtype_wc(start, size);
}

void tt_io_free_memtype_wc(resource_size_t start, resource_size_t size)
{
	arch_io_free_memtype_wc(start, size);
}

static int tt_mapping_init_fs_context(struct fs_context *fc)
{
	return init_pseudo(fc, TT_MAPPING_MAGIC) ? 0 : -ENOMEM;
}

/*
 * No owner: the mount is pinned while a card exists, and a module
 * reference held by it would keep the module from ever being unloaded.
 * The module's code cannot go while a card exists, and the last card
 * releases the mount synchronously (an internal mount), so the filesystem
 * is gone before the module can be.
 */
static struct file_system_type tt_mapping_fs_type = {
	.name = "tenstorrent_mappings",
	.init_fs_context = tt_mapping_init_fs_context,
	.kill_sb = kill_anon_super,
};

static struct vfsmount *tt_mapping_mnt;
static int tt_mapping_mnt_count;

/* A new inode of the pseudo filesystem, or an ERR_PTR. */
struct inode *tt_mapping_inode_new(void)
{
	struct inode *inode;
	int ret;

	ret = simple_pin_fs(&tt_mapping_fs_type, &tt_mapping_mnt,
			    &tt_mapping_mnt_count);
	if (ret)
		return ERR_PTR(ret);
	inode = alloc_anon_inode(tt_mapping_mnt->mnt_sb);
	if (IS_ERR(inode))
		simple_release_fs(&tt_mapping_mnt, &tt_mapping_mnt_count);
	return inode;
}

/* Drops an inode of tt_mapping_inode_new() and its pin of the mount. */
void tt_mapping_inode_put(struct inode *inode)
{
	iput(inode);
	simple_release_fs(&tt_mapping_mnt, &tt_mapping_mnt_count);
}
