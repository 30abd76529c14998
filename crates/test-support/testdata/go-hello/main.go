// go-hello: the smallest program go::build can build (standard library only).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Println("hello from", os.Args[0])
}
