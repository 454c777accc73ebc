package benchreport

func (r *report) storeOps() {}
