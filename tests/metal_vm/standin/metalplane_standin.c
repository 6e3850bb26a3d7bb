// SPDX-License-Identifier: GPL-2.0
/*
 * The VM lane's stand-in for the NVIDIA kernel module: the full lane builds it with DKMS against the installed
 * kernel's headers and loads it, as the NVIDIA .run installer's DKMS build of nvidia.ko needs
 * (tests/metal_vm/test_metal_vm_full.py). It does nothing but say it was loaded.
 */
#include <linux/init.h>
#include <linux/module.h>

static int __init standin_init(void)
{
	pr_info("metalplane_standin: loaded\n");
	return 0;
}

static void __exit standin_exit(void)
{
}

module_init(standin_init);
module_exit(standin_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("metalplane VM lane: DKMS stand-in for the NVIDIA module");
