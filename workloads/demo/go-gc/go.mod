module switchyard/demo/gogc

go 1.22
