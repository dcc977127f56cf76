// One account for the Functions host (blobs, queues, tables), the deployment package and the
// state store (Table Storage). Shared keys are disabled: everything goes through Entra ID.
param name string
param location string
param tags object
param deploymentContainerName string

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    accessTier: 'Hot'
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    dnsEndpointType: 'Standard'
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    }
  }

  resource blobServices 'blobServices' = {
    name: 'default'

    // Flex Consumption reads the app package from here with the app's identity.
    resource deploymentContainer 'containers' = {
      name: deploymentContainerName
      properties: {
        publicAccess: 'None'
      }
    }
  }
}

output name string = storage.name
output blobServiceUri string = storage.properties.primaryEndpoints.blob
output queueServiceUri string = storage.properties.primaryEndpoints.queue
output tableServiceUri string = storage.properties.primaryEndpoints.table
