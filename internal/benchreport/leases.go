package benchreport

func (r *report) leases() {}
