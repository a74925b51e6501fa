# A static build of the operator CLI (cairn-state) and the example app
# (instance) in a distroless image: no libc, no shell, a non-root user.
#   docker build -t cairn-instance .
#   docker run --rm cairn-instance cairn-state version
# docs/kubernetes.md runs it; docs/dockerfile_test.go builds the binaries
# with the same command and environment and checks they are static.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV CGO_ENABLED=0
RUN go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/cairn-state ./examples/instance

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/cairn-state /out/instance /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/instance"]
