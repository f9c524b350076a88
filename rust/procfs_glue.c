// SPDX-License-Identifier: GPL-2.0
/*
 * procfs for the Rust side of the tenstorrent module (rust/procfs.rs).
 *
 * Linux 7.3's Rust bindings do not reach <linux/proc_fs.h>; these few
 * functions are the whole bridge. Every file is a single_open() seq_file
 * whose contents come from a callback stored at the start of the file's
 * data.
 */

#include <linux/proc_fs.h>
#include <linux/seq_file.h>

struct tt_procfs_entry {
	int (*show)(struct seq_file *m, struct tt_procfs_entry *entry);
};

struct proc_dir_entry *tt_procfs_mkdir(const char *name,
				       struct proc_dir_entry *parent);
struct proc_dir_entry *tt_procfs_create(const char *name,
					struct proc_dir_entry *parent,
					struct tt_procfs_entry *entry);
void tt_procfs_remove(struct proc_dir_entry *pde);

static int tt_procfs_show(struct seq_file *m, void *v)
{
	struct tt_procfs_entry *entry = m->private;

	return entry->show(m, entry);
}

static int tt_procfs_open(struct inode *inode, struct file *file)
{
	return single_open(file, tt_procfs_show, pde_data(inode));
}

static const struct proc_ops tt_procfs_ops = {
	.proc_open = tt_procfs_open,
	.proc_read = seq_read,
	.proc_lseek = seq_lseek,
	.proc_release = single_release,
};

struct proc_dir_entry *tt_procfs_mkdir(const char *name,
				       struct proc_dir_entry *parent)
{
	return proc_mkdir(name, parent);
}

struct proc_dir_entry *tt_procfs_create(const char *name,
					struct proc_dir_entry *parent,
					struct tt_procfs_entry *entry)
{
	return proc_create_data(name, 0444, parent, &tt_procfs_ops, entry);
}

/* Removes @pde and its children; returns once no callback runs any more. */
void tt_procfs_remove(struct proc_dir_entry *pde)
{
	proc_remove(pde);
}
