// SPDX-License-Identifier: GPL-2.0
/*
 * hwmon for the Rust side of the tenstorrent module (rust/hwmon.rs).
 *
 * Linux 7.3's Rust bindings do not include <linux/hwmon.h>. This builds a
 * hwmon_chip_info at run time from the channels Rust describes (one
 * channel per sensor type, each with a bit mask of its attributes) and
 * forwards the hwmon callbacks to Rust with the registration's data.
 */

#include <linux/build_bug.h>
#include <linux/device.h>
#include <linux/err.h>
#include <linux/hwmon.h>
#include <linux/slab.h>

/* The numbers rust/hwmon.rs uses for sensor types and attributes. */
static_assert(hwmon_temp == 1 && hwmon_in == 2 && hwmon_curr == 3 &&
	      hwmon_power == 4 && hwmon_fan == 8);
static_assert(hwmon_temp_input == 1 && hwmon_temp_max == 7 &&
	      hwmon_temp_label == 21);
static_assert(hwmon_in_input == 1 && hwmon_in_max == 3 && hwmon_in_label == 10);
static_assert(hwmon_curr_input == 1 && hwmon_curr_max == 3 &&
	      hwmon_curr_label == 10);
static_assert(hwmon_power_input == 9 && hwmon_power_max == 19 &&
	      hwmon_power_label == 22);
static_assert(hwmon_fan_input == 1 && hwmon_fan_label == 2);

#define TT_HWMON_MAX_CHANNELS 8

/* Implemented in Rust (rust/hwmon.rs). */
umode_t tt_hwmon_rust_is_visible(const void *data, u32 type, u32 attr, int channel);
int tt_hwmon_rust_read(const void *data, u32 type, u32 attr, int channel, long *val);
int tt_hwmon_rust_read_string(const void *data, u32 type, u32 attr, int channel,
			      const char **str);

struct tt_hwmon {
	struct device *dev;
	struct hwmon_ops ops;
	struct hwmon_chip_info chip;
	const struct hwmon_channel_info *info[TT_HWMON_MAX_CHANNELS + 1];
	struct hwmon_channel_info channels[TT_HWMON_MAX_CHANNELS];
	u32 config[TT_HWMON_MAX_CHANNELS][2];
};

struct tt_hwmon *tt_hwmon_register(struct device *parent, const char *name,
				   const void *data, const u32 *types,
				   const u32 *attributes, unsigned int count);
void tt_hwmon_unregister(struct tt_hwmon *hwmon);

static umode_t tt_hwmon_is_visible(const void *data, enum hwmon_sensor_types type,
				   u32 attr, int channel)
{
	return tt_hwmon_rust_is_visible(data, type, attr, channel);
}

static int tt_hwmon_read(struct device *dev, enum hwmon_sensor_types type,
			 u32 attr, int channel, long *val)
{
	return tt_hwmon_rust_read(dev_get_drvdata(dev), type, attr, channel, val);
}

static int tt_hwmon_read_string(struct device *dev, enum hwmon_sensor_types type,
				u32 attr, int channel, const char **str)
{
	return tt_hwmon_rust_read_string(dev_get_drvdata(dev), type, attr, channel, str);
}

struct tt_hwmon *tt_hwmon_register(struct device *parent, const char *name,
				   const void *data, const u32 *types,
				   const u32 *attributes, unsigned int count)
{
	struct tt_hwmon *hwmon;
	struct device *dev;
	unsigned int i;

	if (!IS_REACHABLE(CONFIG_HWMON))
		return ERR_PTR(-EOPNOTSUPP);
	if (count > TT_HWMON_MAX_CHANNELS)
		return ERR_PTR(-EINVAL);
	hwmon = kzalloc(sizeof(*hwmon), GFP_KERNEL);
	if (!hwmon)
		return ERR_PTR(-ENOMEM);
	hwmon->ops.is_visible = tt_hwmon_is_visible;
	hwmon->ops.read = tt_hwmon_read;
	hwmon->ops.read_string = tt_hwmon_read_string;
	for (i = 0; i < count; i++) {
		hwmon->config[i][0] = attributes[i];
		hwmon->channels[i].type = types[i];
		hwmon->channels[i].config = hwmon->config[i];
		hwmon->info[i] = &hwmon->channels[i];
	}
	hwmon->chip.ops = &hwmon->ops;
	hwmon->chip.info = hwmon->info;
	dev = hwmon_device_register_with_info(parent, name, (void *)data,
					      &hwmon->chip, NULL);
	if (IS_ERR(dev)) {
		kfree(hwmon);
		return ERR_CAST(dev);
	}
	hwmon->dev = dev;
	return hwmon;
}

void tt_hwmon_unregister(struct tt_hwmon *hwmon)
{
	hwmon_device_unregister(hwmon->dev);
	kfree(hwmon);
}
