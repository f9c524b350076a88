// SPDX-License-Identifier: GPL-2.0
/*
 * dma-buf export of a range of device memory (a BAR aperture) for the Rust
 * side of the tenstorrent module (rust/dmabuf.rs).
 *
 * Linux 7.3's Rust has no dma-buf exporter. The range has no struct page:
 * importers must take peer resources (attach->peer2peer), and get one
 * contiguous mapping of it for their own device (dma_map_resource), cut
 * into scatterlist entries below sg_dma_len's 4 GiB. Rust owns the
 * export's data and is told when the last reference goes.
 */

#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/err.h>
#include <linux/fcntl.h>
#include <linux/file.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/sizes.h>
#include <linux/slab.h>

MODULE_IMPORT_NS("DMA_BUF");

/* Below the 32-bit length of a scatterlist entry. */
#define TT_DMABUF_SG_CHUNK SZ_1G

struct tt_dmabuf {
	phys_addr_t phys;
	size_t size;
	/* Guarded by the dma-buf's reservation lock. */
	bool revoked;
	/* Rust's data, handed to `release` when the last reference goes. */
	void *owner;
	void (*release)(void *owner, struct dma_buf *dmabuf);
};

struct dma_buf *tt_dmabuf_export(phys_addr_t phys, size_t size, void *owner,
				 void (*release)(void *owner, struct dma_buf *dmabuf));
int tt_dmabuf_reserve_fd(void);
void tt_dmabuf_install(int fd, struct dma_buf *dmabuf);
void tt_dmabuf_abandon(int fd, struct dma_buf *dmabuf);
void tt_dmabuf_abandon_fd(int fd);
void tt_dmabuf_revoke(struct dma_buf *dmabuf);

static int tt_dmabuf_attach(struct dma_buf *dmabuf, struct dma_buf_attachment *attach)
{
	return attach->peer2peer ? 0 : -EOPNOTSUPP;
}

static struct sg_table *tt_dmabuf_map(struct dma_buf_attachment *attach,
				      enum dma_data_direction dir)
{
	struct tt_dmabuf *priv = attach->dmabuf->priv;
	struct scatterlist *sg;
	struct sg_table *sgt;
	dma_addr_t addr;
	size_t off = 0;
	int ret, i;

	dma_resv_assert_held(attach->dmabuf->resv);
	if (priv->revoked)
		return ERR_PTR(-ENODEV);
	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table(sgt, DIV_ROUND_UP(priv->size, TT_DMABUF_SG_CHUNK), GFP_KERNEL);
	if (ret) {
		kfree(sgt);
		return ERR_PTR(ret);
	}
	addr = dma_map_resource(attach->dev, priv->phys, priv->size, dir, 0);
	if (dma_mapping_error(attach->dev, addr)) {
		sg_free_table(sgt);
		kfree(sgt);
		return ERR_PTR(-ENOMEM);
	}
	for_each_sg(sgt->sgl, sg, sgt->orig_nents, i) {
		size_t len = min_t(size_t, TT_DMABUF_SG_CHUNK, priv->size - off);

		sg_dma_address(sg) = addr + off;
		sg_dma_len(sg) = len;
		off += len;
	}
	return sgt;
}

static void tt_dmabuf_unmap(struct dma_buf_attachment *attach, struct sg_table *sgt,
			    enum dma_data_direction dir)
{
	struct tt_dmabuf *priv = attach->dmabuf->priv;

	dma_unmap_resource(attach->dev, sg_dma_address(sgt->sgl), priv->size, dir, 0);
	sg_free_table(sgt);
	kfree(sgt);
}

static int tt_dmabuf_pin(struct dma_buf_attachment *attach)
{
	struct tt_dmabuf *priv = attach->dmabuf->priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	return priv->revoked ? -ENODEV : 0;
}

static void tt_dmabuf_unpin(struct dma_buf_attachment *attach)
{
}

static void tt_dmabuf_release(struct dma_buf *dmabuf)
{
	struct tt_dmabuf *priv = dmabuf->priv;

	priv->release(priv->owner, dmabuf);
	kfree(priv);
}

static const struct dma_buf_ops tt_dmabuf_ops = {
	.attach = tt_dmabuf_attach,
	.map_dma_buf = tt_dmabuf_map,
	.unmap_dma_buf = tt_dmabuf_unmap,
	.pin = tt_dmabuf_pin,
	.unpin = tt_dmabuf_unpin,
	.release = tt_dmabuf_release,
};

/*
 * Exports `size` bytes of device memory from `phys`. On success the dma-buf
 * owns `owner` (handed to `release` at the end); on failure it does not.
 */
struct dma_buf *tt_dmabuf_export(phys_addr_t phys, size_t size, void *owner,
				 void (*release)(void *owner, struct dma_buf *dmabuf))
{
	DEFINE_DMA_BUF_EXPORT_INFO(info);
	struct tt_dmabuf *priv;
	struct dma_buf *dmabuf;

	priv = kzalloc(sizeof(*priv), GFP_KERNEL);
	if (!priv)
		return ERR_PTR(-ENOMEM);
	priv->phys = phys;
	priv->size = size;
	priv->owner = owner;
	priv->release = release;
	info.ops = &tt_dmabuf_ops;
	info.size = size;
	info.flags = O_RDWR | O_CLOEXEC;
	info.priv = priv;
	dmabuf = dma_buf_export(&info);
	if (IS_ERR(dmabuf))
		kfree(priv);
	return dmabuf;
}

int tt_dmabuf_reserve_fd(void)
{
	return get_unused_fd_flags(O_CLOEXEC);
}

/* Gives the dma-buf's reference to descriptor `fd` of the caller. */
void tt_dmabuf_install(int fd, struct dma_buf *dmabuf)
{
	fd_install(fd, dmabuf->file);
}

/* Gives `fd` back and drops the dma-buf (its release runs). */
void tt_dmabuf_abandon(int fd, struct dma_buf *dmabuf)
{
	put_unused_fd(fd);
	dma_buf_put(dmabuf);
}

/* Gives back a descriptor reserved for an export that did not happen. */
void tt_dmabuf_abandon_fd(int fd)
{
	put_unused_fd(fd);
}

/* The memory goes away: mappings are invalidated, new ones refused. */
void tt_dmabuf_revoke(struct dma_buf *dmabuf)
{
	struct tt_dmabuf *priv = dmabuf->priv;

	dma_resv_lock(dmabuf->resv, NULL);
	if (!priv->revoked) {
		priv->revoked = true;
		dma_buf_invalidate_mappings(dmabuf);
	}
	dma_resv_unlock(dmabuf->resv);
}
