// Command answer prints which of two variants it is: the same package path
// base and image name with different content, as two checkouts of one
// adapter with different code are (TestSameNameDifferentContent).
package main

import "fmt"

func main() { fmt.Println("variant 1") }
