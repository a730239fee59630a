"""One module per vendor. Each vendor implements whichever of the capability methods in
base.Vendor it can; the router skips a vendor that lacks one."""
