module switchyard.invalid/workloads/read-state-cache

go 1.24
